/** The Node flags `npm start` gives the service, read from package.json's start script. */
export declare const SERVICE_NODE_FLAGS: string[];
