import { type DescMessage, type DescService, fromBinary, type MessageShape, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";

type UnaryCall<O> = (
  request: unknown,
  metadata: grpc.Metadata,
  callback: (error: grpc.ServiceError | null, response: O) => void,
) => grpc.ClientUnaryCall;

/** A stock grpc-js client for one service, (de)serializing with the generated protobuf-es schemas. */
export function grpcClient(service: DescService, address: string) {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: (message: unknown) => Buffer.from(toBinary(method.input, message as MessageShape<DescMessage>)),
      requestDeserialize: (bytes: Buffer) => fromBinary(method.input, bytes),
      responseSerialize: (message: unknown) =>
        Buffer.from(toBinary(method.output, message as MessageShape<DescMessage>)),
      responseDeserialize: (bytes: Buffer) => fromBinary(method.output, bytes),
    };
  }
  const Client = grpc.makeGenericClientConstructor(definition, service.name);
  const client = new Client(address, grpc.credentials.createInsecure());
  return {
    client,
    call<O>(methodName: string, request: unknown, metadata = new grpc.Metadata()): Promise<O> {
      return new Promise((resolve, reject) => {
        const method = (client as unknown as Record<string, UnaryCall<O>>)[methodName].bind(client);
        method(request, metadata, (error: grpc.ServiceError | null, response: O) =>
          error ? reject(error) : resolve(response),
        );
      });
    },
    close: () => client.close(),
  };
}
