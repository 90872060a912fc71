import { create, createFileRegistry, type DescMessage } from "@bufbuild/protobuf";
import {
  FieldOptions_JSType,
  FileDescriptorProtoSchema,
  file_google_protobuf_duration,
  file_google_protobuf_empty,
  file_google_protobuf_field_mask,
  file_google_protobuf_struct,
  file_google_protobuf_timestamp,
  file_google_protobuf_wrappers,
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
} from "@bufbuild/protobuf/wkt";

const WELL_KNOWN = [
  file_google_protobuf_duration,
  file_google_protobuf_empty,
  file_google_protobuf_field_mask,
  file_google_protobuf_struct,
  file_google_protobuf_timestamp,
  file_google_protobuf_wrappers,
];

const SINK = ".test.v1.KitchenSink";

interface FieldSpec {
  type: Type;
  typeName?: string;
  repeated?: boolean;
  oneofIndex?: number;
  proto3Optional?: boolean;
  longAsString?: boolean;
}

const FIELDS: Record<string, FieldSpec> = {
  double_value: { type: Type.DOUBLE },
  float_value: { type: Type.FLOAT },
  int64_value: { type: Type.INT64 },
  uint64_value: { type: Type.UINT64 },
  int32_value: { type: Type.INT32 },
  fixed64_value: { type: Type.FIXED64 },
  fixed32_value: { type: Type.FIXED32 },
  bool_value: { type: Type.BOOL },
  string_value: { type: Type.STRING },
  bytes_value: { type: Type.BYTES },
  uint32_value: { type: Type.UINT32 },
  sfixed32_value: { type: Type.SFIXED32 },
  sfixed64_value: { type: Type.SFIXED64 },
  sint32_value: { type: Type.SINT32 },
  sint64_value: { type: Type.SINT64 },
  long_as_string: { type: Type.INT64, longAsString: true },
  color: { type: Type.ENUM, typeName: ".test.v1.Color" },
  optional_string: { type: Type.STRING, oneofIndex: 1, proto3Optional: true },
  optional_int64: { type: Type.INT64, oneofIndex: 2, proto3Optional: true },
  text: { type: Type.STRING, oneofIndex: 0 },
  number: { type: Type.INT32, oneofIndex: 0 },
  nested: { type: Type.MESSAGE, typeName: SINK, oneofIndex: 0 },
  stamp: { type: Type.MESSAGE, typeName: ".google.protobuf.Timestamp", oneofIndex: 0 },
  child: { type: Type.MESSAGE, typeName: SINK },
  children: { type: Type.MESSAGE, typeName: SINK, repeated: true },
  colors: { type: Type.ENUM, typeName: ".test.v1.Color", repeated: true },
  blobs: { type: Type.BYTES, repeated: true },
  doubles: { type: Type.DOUBLE, repeated: true },
  longs: { type: Type.INT64, repeated: true, longAsString: true },
  strings: { type: Type.STRING, repeated: true },
  duration: { type: Type.MESSAGE, typeName: ".google.protobuf.Duration" },
  timestamp: { type: Type.MESSAGE, typeName: ".google.protobuf.Timestamp" },
  durations: { type: Type.MESSAGE, typeName: ".google.protobuf.Duration", repeated: true },
  timestamps: { type: Type.MESSAGE, typeName: ".google.protobuf.Timestamp", repeated: true },
  wrapped_int64: { type: Type.MESSAGE, typeName: ".google.protobuf.Int64Value" },
  wrapped_uint32: { type: Type.MESSAGE, typeName: ".google.protobuf.UInt32Value" },
  wrapped_string: { type: Type.MESSAGE, typeName: ".google.protobuf.StringValue" },
  wrapped_double: { type: Type.MESSAGE, typeName: ".google.protobuf.DoubleValue" },
  wrapped_float: { type: Type.MESSAGE, typeName: ".google.protobuf.FloatValue" },
  wrapped_bool: { type: Type.MESSAGE, typeName: ".google.protobuf.BoolValue" },
  wrapped_bytes: { type: Type.MESSAGE, typeName: ".google.protobuf.BytesValue" },
  struct: { type: Type.MESSAGE, typeName: ".google.protobuf.Struct" },
  value: { type: Type.MESSAGE, typeName: ".google.protobuf.Value" },
  values: { type: Type.MESSAGE, typeName: ".google.protobuf.Value", repeated: true },
  list_value: { type: Type.MESSAGE, typeName: ".google.protobuf.ListValue" },
  mask: { type: Type.MESSAGE, typeName: ".google.protobuf.FieldMask" },
  empty: { type: Type.MESSAGE, typeName: ".google.protobuf.Empty" },
  null_value: { type: Type.ENUM, typeName: ".google.protobuf.NullValue" },
};

/** Map fields: name → [key type, value type, value type name]. */
const MAPS: Record<string, [Type, Type, string?]> = {
  by_string: [Type.STRING, Type.MESSAGE, ".google.protobuf.Duration"],
  by_int32: [Type.INT32, Type.STRING],
  by_int64: [Type.INT64, Type.MESSAGE, SINK],
  by_uint64: [Type.UINT64, Type.BYTES],
  by_bool: [Type.BOOL, Type.ENUM, ".test.v1.Color"],
  by_sint32: [Type.SINT32, Type.DOUBLE],
  labels: [Type.STRING, Type.STRING],
};

/**
 * A message with every kind of field the REST encoder can meet, whether or not the contract uses it yet: every
 * scalar type, an enum, proto3 optionals, a oneof, lists, maps keyed by every key type, itself recursively, and
 * well-known types (Duration, Timestamp, wrappers, Struct, Value, ListValue, FieldMask, Empty, NullValue).
 */
export const KitchenSinkSchema: DescMessage = kitchenSink();

function kitchenSink(): DescMessage {
  const message = {
    name: "KitchenSink",
    field: [] as unknown[],
    nestedType: [] as unknown[],
    oneofDecl: [{ name: "choice" }, { name: "_optional_string" }, { name: "_optional_int64" }],
  };
  let number = 1;
  for (const [name, spec] of Object.entries(FIELDS)) {
    message.field.push({
      name,
      number: number++,
      jsonName: camel(name),
      type: spec.type,
      typeName: spec.typeName ?? "",
      label: spec.repeated ? Label.REPEATED : Label.OPTIONAL,
      oneofIndex: spec.oneofIndex,
      proto3Optional: spec.proto3Optional ?? false,
      options: spec.longAsString ? { jstype: FieldOptions_JSType.JS_STRING } : undefined,
    });
  }
  for (const [name, [keyType, valueType, valueTypeName]] of Object.entries(MAPS)) {
    const entry = `${camel(name).replace(/^./, (first) => first.toUpperCase())}Entry`;
    message.nestedType.push({
      name: entry,
      options: { mapEntry: true },
      field: [
        { name: "key", number: 1, jsonName: "key", type: keyType, label: Label.OPTIONAL },
        {
          name: "value",
          number: 2,
          jsonName: "value",
          type: valueType,
          typeName: valueTypeName,
          label: Label.OPTIONAL,
        },
      ],
    });
    message.field.push({
      name,
      number: number++,
      jsonName: camel(name),
      type: Type.MESSAGE,
      typeName: `${SINK}.${entry}`,
      label: Label.REPEATED,
    });
  }
  const file = create(FileDescriptorProtoSchema, {
    name: "test/v1/kitchen_sink.proto",
    package: "test.v1",
    syntax: "proto3",
    dependency: WELL_KNOWN.map((known) => known.proto.name),
    enumType: [
      {
        name: "Color",
        value: [
          { name: "COLOR_UNSPECIFIED", number: 0 },
          { name: "COLOR_RED", number: 1 },
        ],
      },
    ],
    messageType: [message as never],
  });
  const registry = createFileRegistry(file, (name) => WELL_KNOWN.find((known) => known.proto.name === name));
  const schema = registry.getMessage("test.v1.KitchenSink");
  if (!schema) throw new Error("test.v1.KitchenSink did not build");
  return schema;
}

/**
 * A proto2 message: its unset optionals read as their defaults (from the prototype) but are still unset, so
 * they are written as null.
 */
export const Proto2Schema: DescMessage = proto2();

function proto2(): DescMessage {
  const optional = (name: string, number: number, type: Type, extra = {}) =>
    ({ name, number, jsonName: camel(name), type, label: Label.OPTIONAL, ...extra }) as never;
  const file = create(FileDescriptorProtoSchema, {
    name: "test/v1/legacy.proto",
    package: "test.v1",
    syntax: "proto2",
    messageType: [
      {
        name: "Legacy",
        field: [
          optional("name", 1, Type.STRING, { defaultValue: "unnamed" }),
          optional("count", 2, Type.INT32, { defaultValue: "7" }),
          optional("big", 3, Type.INT64, { defaultValue: "-9" }),
          optional("child", 4, Type.MESSAGE, { typeName: ".test.v1.Legacy" }),
          { name: "tags", number: 5, jsonName: "tags", type: Type.STRING, label: Label.REPEATED } as never,
        ],
      },
    ],
  });
  const schema = createFileRegistry(file, () => undefined).getMessage("test.v1.Legacy");
  if (!schema) throw new Error("test.v1.Legacy did not build");
  return schema;
}

function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());
}
