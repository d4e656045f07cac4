"""Curio's side of `cuzk gateway`, written independently of our Rust code: the gRPC client is
generated at run time from the proto (grpcio-tools), as Curio generates its Go client from the
same file, and every call prints a transcript line.

Usage:
  gateway_client.py ADDRESS PROTO_DIR checks
      Lists the served services by reflection (grpcurl-style), reads GetStatus and GetMetrics,
      and checks the refusals: unknown proof kinds are UNIMPLEMENTED, a
      malformed C1 is INVALID_ARGUMENT, an AwaitProof that ends before the job does says
      TIMEOUT.
  gateway_client.py ADDRESS PROTO_DIR cancel RUNNING_JOB DONE_JOB
      CancelProof of a running job (was_running, then AwaitProof says CANCELLED), again (no
      longer running), of a finished job (not running, its status `done` in the reply's
      cuzk-job-status metadata), of an unknown id (NOT_FOUND) and of a malformed one.
  gateway_client.py ADDRESS PROTO_DIR srs CIRCUIT_ID
      PreloadSRS (loads), again (already loaded), EvictSRS (frees), again (nothing loaded);
      unknown ids are INVALID_ARGUMENT.
  gateway_client.py ADDRESS PROTO_DIR srs-refused CIRCUIT_ID
      PreloadSRS where a GPU node lacks the shape's parameters and may not generate test
      ones: FAILED_PRECONDITION naming that node's reason.
  gateway_client.py ADDRESS PROTO_DIR prove-fails C1_FILE MINER SECTOR
      Prove with a C1 that is well-formed but wrong: the reply must say FAILED with a reason.
  gateway_client.py ADDRESS PROTO_DIR post REQUEST_JSON PROOF_OUT
      A PoSt request as Curio sends it, its fields from REQUEST_JSON (proof_kind by name,
      registered_proof, miner_id, partition_index, randomness in hex, vanilla_proofs in
      base64): first Prove with one vanilla proof corrupted here (a byte of its comm_r flipped),
      which must say FAILED because the proofs do not verify, then SubmitProof and AwaitProof
      of the request as given (COMPLETED, one 192-byte proof), written to PROOF_OUT for
      filecoin-proofs' verify_window_post / verify_winning_post.
ADDRESS is host:port or unix:PATH. Exits non-zero on the first unexpected answer.
"""

import base64
import importlib
import json
import os
import sys
import tempfile
import time

import grpc
from grpc_tools import protoc

PROTO = "cuzk/v1/proving.proto"
# Curio's client limits (lib/cuzk/client.go in Curio).
OPTIONS = [
    ("grpc.max_send_message_length", 256 << 20),
    ("grpc.max_receive_message_length", 256 << 20),
]
STACKED_DRG_2KIB_V1_1 = 5


def generate(proto_dir):
    out = tempfile.mkdtemp(prefix="cuzk-grpc-py-")
    rc = protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}", PROTO])
    if rc != 0:
        sys.exit(f"protoc failed ({rc})")
    sys.path.insert(0, out)
    return (importlib.import_module("cuzk.v1.proving_pb2"), importlib.import_module("cuzk.v1.proving_pb2_grpc"))


def say(line):
    print(line, flush=True)


FAILURES = []


def fail_on_failures():
    if FAILURES:
        sys.exit("unexpected answers:\n" + "\n".join(FAILURES))


def expect_code(what, call, code, text):
    """Records (rather than stops at) a wrong answer, so one run shows every refusal that broke."""
    try:
        reply = call()
    except grpc.RpcError as e:
        say(f"{what}: {e.code().name}: {e.details()}")
        if e.code() != code or text not in e.details():
            FAILURES.append(f"{what}: expected {code.name} mentioning {text!r}, got {e.code().name}")
        return
    say(f"{what}: a reply: {reply}")
    FAILURES.append(f"{what}: expected {code.name}, got a reply")


def listing(channel):
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
    from google.protobuf import descriptor_pb2

    stub = reflection_pb2_grpc.ServerReflectionStub(channel)

    def ask(**request):
        return next(iter(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(**request)]))))

    services = [s.name for s in ask(list_services="").list_services_response.service]
    say("$ grpcurl list  (by reflection)")
    for name in services:
        say(f"  {name}")
    if "cuzk.v1.ProvingEngine" not in services:
        sys.exit("cuzk.v1.ProvingEngine is not served")
    reply = ask(file_containing_symbol="cuzk.v1.ProvingEngine")
    say("$ grpcurl describe cuzk.v1.ProvingEngine")
    for raw in reply.file_descriptor_response.file_descriptor_proto:
        fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
        for service in fd.service:
            for m in service.method:
                say(f"  rpc {m.name}({m.input_type.lstrip('.')}) returns ({m.output_type.lstrip('.')})")
        for message in fd.message_type:
            if message.name == "SubmitProofRequest":
                fields = ", ".join(f"{f.name}={f.number}" for f in message.field)
                say(f"  message SubmitProofRequest: {fields}")


def checks(pb, stub, channel):
    status = stub.GetStatus(pb.GetStatusRequest(), timeout=10)
    say(f"GetStatus: gpus={[g.name for g in status.gpus]} queues={[(q.proof_kind, q.pending, q.in_progress) for q in status.queues]} completed={status.total_proofs_completed} failed={status.total_proofs_failed} uptime={status.uptime_seconds}s")
    if not any(g.name for g in status.gpus):
        sys.exit("GetStatus lists no GPU node")
    metrics = stub.GetMetrics(pb.GetMetricsRequest(), timeout=10).prometheus_text
    gauges = [l for l in metrics.splitlines() if l.startswith("cuzk_cluster_nodes")]
    say(f"GetMetrics: {len(metrics)} bytes of Prometheus text; {gauges}")
    if 'cuzk_cluster_nodes{role="gpu"} 1' not in metrics:
        sys.exit("GetMetrics does not count the GPU node")

    def submit(**fields):
        base = dict(request_id="curio-check", proof_kind=pb.POREP_SEAL_COMMIT, sector_size=2048,
                    registered_proof=STACKED_DRG_2KIB_V1_1, sector_number=7, miner_id=1234,
                    vanilla_proof=b'{"vanilla_proofs": [[]]}')
        base.update(fields)
        return lambda: stub.SubmitProof(pb.SubmitProofRequest(**base), timeout=10)

    unimplemented, invalid = grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INVALID_ARGUMENT
    expect_code("SubmitProof SNAP_DEALS_UPDATE, 31-byte comm_r_old", submit(proof_kind=pb.SNAP_DEALS_UPDATE, registered_proof=0, vanilla_proofs=[b"x"], comm_r_old=b"\x01" * 31, comm_r_new=b"\x01" * 32, comm_d_new=b"\x01" * 32), invalid, "comm_r_old has 31 bytes")
    expect_code("SubmitProof WINDOW_POST_PARTITION without vanilla_proofs", submit(proof_kind=pb.WINDOW_POST_PARTITION, randomness=b"\x01" * 32), invalid, "vanilla_proofs is empty")
    expect_code("SubmitProof WINNING_POST with a WindowPoSt proof type", submit(proof_kind=pb.WINNING_POST, randomness=b"\x01" * 32), invalid, "not a winning-post proof")
    expect_code("SubmitProof WINDOW_POST_PARTITION, 31-byte randomness", submit(proof_kind=pb.WINDOW_POST_PARTITION, randomness=b"\x01" * 31, vanilla_proofs=[b"x"]), invalid, "randomness has 31 bytes")
    expect_code("SubmitProof proof_kind=42", submit(proof_kind=42), unimplemented, "42")
    expect_code("SubmitProof malformed C1", submit(vanilla_proof=b"\x00\xffnot json"), invalid, "not a C1 output")
    expect_code("SubmitProof truncated C1", submit(vanilla_proof=b'{"SectorNum": 7, "Phase1Out": "eyJ'), invalid, "not a C1 output")
    expect_code("SubmitProof 32 GiB proof, 2 KiB size", submit(registered_proof=8), invalid, "sector_size 2048")
    expect_code("Prove without submit", lambda: stub.Prove(pb.ProveRequest(), timeout=10), invalid, "submit")
    expect_code("AwaitProof bad id", lambda: stub.AwaitProof(pb.AwaitProofRequest(job_id="a b"), timeout=10), invalid, "job id")
    reply = stub.AwaitProof(pb.AwaitProofRequest(job_id="never-submitted", timeout_ms=200), timeout=10)
    say(f"AwaitProof never-submitted (200 ms): {pb.AwaitProofResponse.Status.Name(reply.status)}")
    if reply.status != pb.AwaitProofResponse.TIMEOUT:
        sys.exit("expected TIMEOUT")
    listing(channel)
    fail_on_failures()


def cancel_proof(pb, stub, job_id):
    reply, call = stub.CancelProof.with_call(pb.CancelProofRequest(job_id=job_id), timeout=30)
    status = dict(call.initial_metadata()).get("cuzk-job-status")
    say(f"CancelProof {job_id}: was_running={reply.was_running} cuzk-job-status={status}")
    return reply.was_running, status


def cancel(pb, stub, running, done):
    if cancel_proof(pb, stub, running) != (True, "cancelled"):
        sys.exit("expected was_running, cancelled")
    reply = stub.AwaitProof(pb.AwaitProofRequest(job_id=running, timeout_ms=10000), timeout=30)
    say(f"AwaitProof {running}: {pb.AwaitProofResponse.Status.Name(reply.status)} error={reply.error_message!r}")
    if reply.status != pb.AwaitProofResponse.CANCELLED:
        sys.exit("expected CANCELLED")
    if cancel_proof(pb, stub, running) != (False, "cancelled"):
        sys.exit("expected not running, cancelled")
    if cancel_proof(pb, stub, done) != (False, "done"):
        sys.exit("expected not running, done")
    expect_code("CancelProof unknown id", lambda: stub.CancelProof(pb.CancelProofRequest(job_id="never-submitted"), timeout=30),
                grpc.StatusCode.NOT_FOUND, "no job")
    expect_code("CancelProof bad id", lambda: stub.CancelProof(pb.CancelProofRequest(job_id="a b"), timeout=10),
                grpc.StatusCode.INVALID_ARGUMENT, "job id")
    fail_on_failures()


def srs(pb, stub, circuit_id):
    for expected in (False, True):
        reply = stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id=circuit_id), timeout=120)
        say(f"PreloadSRS {circuit_id}: already_loaded={reply.already_loaded} load_time_ms={reply.load_time_ms}")
        if reply.already_loaded != expected:
            sys.exit(f"expected already_loaded={expected}")
    for expected in (True, False):
        reply = stub.EvictSRS(pb.EvictSrsRequest(circuit_id=circuit_id), timeout=30)
        say(f"EvictSRS {circuit_id}: was_loaded={reply.was_loaded} freed_bytes={reply.freed_bytes}")
        if reply.was_loaded != expected or (reply.freed_bytes > 0) != expected:
            sys.exit(f"expected was_loaded={expected} and bytes freed accordingly")
    reply = stub.EvictSRS(pb.EvictSrsRequest(circuit_id="porep-32g"), timeout=30)
    say(f"EvictSRS porep-32g: was_loaded={reply.was_loaded} freed_bytes={reply.freed_bytes}")
    expect_code("PreloadSRS porep-16g", lambda: stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="porep-16g"), timeout=30),
                grpc.StatusCode.INVALID_ARGUMENT, "accepted")
    fail_on_failures()


def srs_refused(pb, stub, circuit_id):
    expect_code(f"PreloadSRS {circuit_id}", lambda: stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id=circuit_id), timeout=120),
                grpc.StatusCode.FAILED_PRECONDITION, "does not generate test parameters")
    fail_on_failures()


def porep_request(pb, c1_file, miner, sector):
    with open(c1_file, "rb") as f:
        c1 = f.read()
    return pb.SubmitProofRequest(
        request_id=f"porep-{miner}-{sector}", proof_kind=pb.POREP_SEAL_COMMIT, sector_size=2048,
        registered_proof=STACKED_DRG_2KIB_V1_1, priority=pb.NORMAL, vanilla_proof=c1,
        sector_number=int(sector), miner_id=int(miner))


def show(what, reply, started):
    name = type(reply).Status.Name(reply.status)
    say(f"{what}: {name} job={reply.job_id} proof={len(reply.proof)} bytes error={reply.error_message!r} "
        f"queue_wait={reply.queue_wait_ms} synthesis={reply.synthesis_ms} gpu={reply.gpu_compute_ms} "
        f"total={reply.total_ms} ms (client {time.monotonic() - started:.1f} s)")


def prove_fails(pb, stub, c1_file, miner, sector):
    started = time.monotonic()
    reply = stub.Prove(pb.ProveRequest(submit=porep_request(pb, c1_file, miner, sector)), timeout=300).result
    show("Prove (corrupt C1)", reply, started)
    if reply.status != pb.AwaitProofResponse.FAILED or "do not verify" not in reply.error_message:
        sys.exit("expected FAILED: ... do not verify")


def post_request(pb, fields, corrupt=False):
    proofs = [base64.b64decode(p) for p in fields["vanilla_proofs"]]
    if corrupt:
        # bincode FallbackPoStSectorProof: sector id (8 bytes), then comm_r.
        first = bytearray(proofs[0])
        first[8] ^= 1
        proofs[0] = bytes(first)
    return pb.SubmitProofRequest(
        request_id=f"post-{fields['miner_id']}-{fields['partition_index']}",
        proof_kind=pb.ProofKind.Value(fields["proof_kind"]), registered_proof=fields["registered_proof"],
        priority=pb.NORMAL, vanilla_proofs=proofs, miner_id=fields["miner_id"],
        randomness=bytes.fromhex(fields["randomness"]), partition_index=fields["partition_index"])


def post(pb, stub, request_file, out):
    with open(request_file) as f:
        fields = json.load(f)
    started = time.monotonic()
    reply = stub.Prove(pb.ProveRequest(submit=post_request(pb, fields, corrupt=True)), timeout=300).result
    show(f"Prove {fields['proof_kind']} (a corrupted vanilla proof)", reply, started)
    if reply.status != pb.AwaitProofResponse.FAILED or "not verify" not in reply.error_message:
        sys.exit("expected FAILED: ... do not verify")
    started = time.monotonic()
    request = post_request(pb, fields)
    job = stub.SubmitProof(request, timeout=60)
    say(f"SubmitProof {fields['proof_kind']} ({len(request.vanilla_proofs)} vanilla proofs, "
        f"{sum(len(p) for p in request.vanilla_proofs)} bytes): job_id={job.job_id}")
    reply = stub.AwaitProof(pb.AwaitProofRequest(job_id=job.job_id, timeout_ms=0), timeout=600)
    show("AwaitProof (no limit)", reply, started)
    if reply.status != pb.AwaitProofResponse.COMPLETED or len(reply.proof) != 192:
        sys.exit("expected COMPLETED with one 192-byte proof")
    with open(out, "wb") as f:
        f.write(reply.proof)


def main(argv):
    address, proto_dir, command, *args = argv[1:]
    pb, pb_grpc = generate(proto_dir)
    options = list(OPTIONS)
    if address.startswith("unix:"):
        # grpc-core would send the socket path as :authority, which is no valid authority
        # (the server's HTTP/2 layer resets the stream); Curio's Go client sends "localhost".
        options.append(("grpc.default_authority", "localhost"))
    with grpc.insecure_channel(address, options=options) as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
        stub = pb_grpc.ProvingEngineStub(channel)
        {"checks": checks, "prove-fails": prove_fails, "cancel": cancel, "srs": srs,
         "srs-refused": srs_refused, "post": post}[command](
            pb, stub, *([channel] if command == "checks" else args))
    say("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
