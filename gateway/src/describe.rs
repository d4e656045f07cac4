//! A `grpcurl describe`-style listing of the served proto, printed from the compiled
//! descriptor (what the reflection service serves): services and methods, then every message
//! with its fields' types and numbers and every enum with its values.

use std::fmt::Write as _;

use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorSet};

fn field_type(field: &FieldDescriptorProto) -> String {
    let scalar = match field.r#type() {
        Type::Message | Type::Enum => return field.type_name().trim_start_matches('.').to_owned(),
        Type::String => "string",
        Type::Bytes => "bytes",
        Type::Bool => "bool",
        Type::Uint64 => "uint64",
        Type::Uint32 => "uint32",
        Type::Int64 => "int64",
        Type::Int32 => "int32",
        Type::Double => "double",
        Type::Float => "float",
        other => other.as_str_name(),
    };
    scalar.to_owned()
}

fn write_enum(out: &mut String, prefix: &str, e: &EnumDescriptorProto, indent: &str) {
    let _ = writeln!(out, "{indent}enum {prefix}{} {{", e.name());
    for v in &e.value {
        let _ = writeln!(out, "{indent}  {} = {};", v.name(), v.number());
    }
    let _ = writeln!(out, "{indent}}}");
}

fn write_message(out: &mut String, prefix: &str, m: &DescriptorProto) {
    let _ = writeln!(out, "message {prefix}{} {{", m.name());
    for e in &m.enum_type {
        write_enum(out, "", e, "  ");
    }
    for f in &m.field {
        let repeated = if f.label() == Label::Repeated {
            "repeated "
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  {repeated}{} {} = {};",
            field_type(f),
            f.name(),
            f.number()
        );
    }
    let _ = writeln!(out, "}}");
}

/// The listing of [`crate::proto::FILE_DESCRIPTOR_SET`].
pub fn describe() -> Result<String, prost::DecodeError> {
    let set = FileDescriptorSet::decode(crate::proto::FILE_DESCRIPTOR_SET)?;
    let mut out = String::new();
    for file in &set.file {
        let prefix = format!("{}.", file.package());
        for service in &file.service {
            let _ = writeln!(out, "service {prefix}{} {{", service.name());
            for m in &service.method {
                let _ = writeln!(
                    out,
                    "  rpc {}({}) returns ({});",
                    m.name(),
                    m.input_type().trim_start_matches('.'),
                    m.output_type().trim_start_matches('.')
                );
            }
            let _ = writeln!(out, "}}");
        }
        for e in &file.enum_type {
            write_enum(&mut out, &prefix, e, "");
        }
        for m in &file.message_type {
            write_message(&mut out, &prefix, m);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    /// The served API is Curio's: every method, and the request fields Curio fills in, with
    /// Curio's numbers.
    #[test]
    fn the_listing_is_curios_api() {
        let listing = super::describe().unwrap();
        for line in [
            "service cuzk.v1.ProvingEngine {",
            "  rpc SubmitProof(cuzk.v1.SubmitProofRequest) returns (cuzk.v1.SubmitProofResponse);",
            "  rpc AwaitProof(cuzk.v1.AwaitProofRequest) returns (cuzk.v1.AwaitProofResponse);",
            "  rpc Prove(cuzk.v1.ProveRequest) returns (cuzk.v1.ProveResponse);",
            "  rpc CancelProof(cuzk.v1.CancelProofRequest) returns (cuzk.v1.CancelProofResponse);",
            "  rpc GetStatus(cuzk.v1.GetStatusRequest) returns (cuzk.v1.GetStatusResponse);",
            "  rpc GetMetrics(cuzk.v1.GetMetricsRequest) returns (cuzk.v1.GetMetricsResponse);",
            "  rpc PreloadSRS(cuzk.v1.PreloadSrsRequest) returns (cuzk.v1.PreloadSrsResponse);",
            "  rpc EvictSRS(cuzk.v1.EvictSrsRequest) returns (cuzk.v1.EvictSrsResponse);",
            "  cuzk.v1.ProofKind proof_kind = 2;",
            "  uint64 registered_proof = 4;",
            "  bytes vanilla_proof = 10;",
            "  uint64 miner_id = 21;",
            "  repeated bytes vanilla_proofs = 11;",
            "  bytes comm_d_new = 32;",
            "  cuzk.v1.AwaitProofResponse.Status status = 2;",
            "  uint64 total_ms = 14;",
            "  repeated cuzk.v1.QueueStatus queues = 3;",
        ] {
            assert!(
                listing.lines().any(|l| l == line),
                "{line:?} missing from\n{listing}"
            );
        }
    }
}
