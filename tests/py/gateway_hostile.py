"""Whoever reaches `cuzk gateway`'s port, written independently of our Rust code: a gRPC client
generated at run time from the proto (grpcio-tools), as in gateway_client.py, that sends what a
careless or hostile client would, and checks the gateway refuses it quickly and cheaply.

Usage: gateway_hostile.py ADDRESS PROTO_DIR [--ca PEM] [--token TOKEN] COMMAND ARGS...
  huge-ids PID
      AwaitProof, CancelProof and PreloadSRS with a 48 MiB id, and AwaitProof with a 200 MiB
      one: each an error within 1 s, and the gateway's peak RSS (VmHWM of /proc/PID/status)
      grown by at most 300 MiB over all of them.
  flood MAX_CALLS
      2 * MAX_CALLS AwaitProof calls at once over 8 connections: those past MAX_CALLS are
      RESOURCE_EXHAUSTED within 1 s, not queued.
  deadline
      AwaitProof that would wait a day, with a client deadline of 30 s, on a gateway whose
      longest deadline is shorter: DEADLINE_EXCEEDED from the gateway within 10 s.
  idempotent C1_FILE MINER SECTOR
      SubmitProof twice with one request_id: the same job id both times; another request_id
      names another job.
  auth CURIO_TOKEN OTHER_TOKEN OPS_CERT OPS_KEY C1_FILE MINER SECTOR
      Over TLS (--ca): no credentials or an unknown token are UNAUTHENTICATED; client curio
      (submit only) is PERMISSION_DENIED for CRITICAL and EvictSRS, submits a NORMAL job and
      may cancel it, client other may not; the ops client, known by its certificate (mutual
      TLS), may evict keys and cancel curio's job.
  prove-beside PID C1_FILE MINER SECTOR PROOF_OUT
      SubmitProof of a real sector twice with one request_id (one job), AwaitProof with a 1 ms
      timeout (TIMEOUT), then, while it proves, the huge ids, a flood of 16 calls (the gateway
      serves 8) and a call without credentials; then AwaitProof without a timeout: COMPLETED,
      the proof written to PROOF_OUT for verify_seal.
Exits non-zero on the first unexpected answer.
"""

import argparse
import importlib
import os
import sys
import tempfile
import threading
import time

import grpc
from grpc_tools import protoc

PROTO = "cuzk/v1/proving.proto"
OPTIONS = [
    ("grpc.max_send_message_length", 256 << 20),
    ("grpc.max_receive_message_length", 256 << 20),
]
STACKED_DRG_2KIB_V1_1 = 5
MIB = 1 << 20


def say(line):
    print(line, flush=True)


def generate(proto_dir):
    out = tempfile.mkdtemp(prefix="cuzk-grpc-py-")
    rc = protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}", PROTO])
    if rc != 0:
        sys.exit(f"protoc failed ({rc})")
    sys.path.insert(0, out)
    return (importlib.import_module("cuzk.v1.proving_pb2"), importlib.import_module("cuzk.v1.proving_pb2_grpc"))


class Client:
    """A channel (its own connection) to the gateway, with or without credentials."""

    def __init__(self, pb, pb_grpc, address, ca=None, token=None, cert=None, key=None, tag=0):
        self.pb, self.token = pb, token
        # A pool of its own: channels with the same target otherwise share one connection.
        options = OPTIONS + [("grpc.use_local_subchannel_pool", 1), ("cuzk.test.connection", tag)]
        if address.startswith("unix:"):
            options.append(("grpc.default_authority", "localhost"))
        if ca:
            read = lambda path: open(path, "rb").read() if path else None
            creds = grpc.ssl_channel_credentials(read(ca), read(key), read(cert))
            options.append(("grpc.ssl_target_name_override", "localhost"))
            self.channel = grpc.secure_channel(address, creds, options)
        else:
            self.channel = grpc.insecure_channel(address, options)
        self.stub = pb_grpc.ProvingEngineStub(self.channel)

    def metadata(self):
        return (("authorization", f"Bearer {self.token}"),) if self.token else None

    def call(self, method, request, timeout=30):
        return getattr(self.stub, method)(request, timeout=timeout, metadata=self.metadata())

    def raw(self, method, payload, reply_type, timeout=30):
        """A call with an already serialized request: its time is the call's, not the encoding's."""
        call = self.channel.unary_unary(f"/cuzk.v1.ProvingEngine/{method}", request_serializer=None,
                                        response_deserializer=reply_type.FromString)
        return call(payload, timeout=timeout, metadata=self.metadata())

    def future(self, method, request, timeout=30):
        return getattr(self.stub, method).future(request, timeout=timeout, metadata=self.metadata())


def expect_error(what, call, codes, within=None):
    started = time.monotonic()
    try:
        reply = call()
    except grpc.RpcError as e:
        took = time.monotonic() - started
        say(f"{what}: {e.code().name} in {took:.2f} s: {e.details()[:160]!r}")
        if e.code() not in codes:
            sys.exit(f"{what}: expected {[c.name for c in codes]}, got {e.code().name}")
        if within is not None and took > within:
            sys.exit(f"{what}: answered in {took:.2f} s, over {within} s")
        return e
    sys.exit(f"{what}: expected {[c.name for c in codes]}, got a reply: {str(reply)[:200]}")


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) << 10
    sys.exit("no VmHWM")


REFUSED = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE)


def huge_ids(client, pid):
    pb = client.pb
    pid = int(pid)
    before = peak_rss(pid)
    big = "a" * (48 * MIB)
    calls = [
        ("AwaitProof, 48 MiB job_id", "AwaitProof", pb.AwaitProofRequest(job_id=big, timeout_ms=1), pb.AwaitProofResponse),
        ("CancelProof, 48 MiB job_id", "CancelProof", pb.CancelProofRequest(job_id=big), pb.CancelProofResponse),
        ("PreloadSRS, 48 MiB circuit_id", "PreloadSRS", pb.PreloadSrsRequest(circuit_id=big), pb.PreloadSrsResponse),
        ("AwaitProof, 200 MiB job_id", "AwaitProof", pb.AwaitProofRequest(job_id="b" * (200 * MIB), timeout_ms=1),
         pb.AwaitProofResponse),
    ]
    failures = []
    for what, method, request, reply_type in calls:
        payload = request.SerializeToString()
        started = time.monotonic()
        try:
            reply = client.raw(method, payload, reply_type, timeout=30)
            failures.append(f"{what}: a reply: {str(reply)[:100]}")
            continue
        except grpc.RpcError as e:
            took, code, details = time.monotonic() - started, e.code(), e.details()
        grown = peak_rss(pid) - before
        say(f"{what}: {code.name} in {took:.2f} s, gateway peak RSS +{grown / MIB:.0f} MiB: {details[:120]!r}")
        if code not in REFUSED:
            failures.append(f"{what}: {code.name}")
        if took > 1.0:
            failures.append(f"{what}: answered in {took:.2f} s, over 1 s")
        # A status message over the client's 16 KiB metadata limit: the gateway echoed the id.
        if "metadata size exceeds" in details:
            failures.append(f"{what}: the gateway's answer echoed the id")
    grown = peak_rss(pid) - before
    say(f"gateway peak RSS {before / MIB:.0f} MiB -> {(before + grown) / MIB:.0f} MiB: grew {grown / MIB:.0f} MiB")
    if grown > 300 * MIB:
        failures.append(f"the gateway's peak RSS grew by {grown / MIB:.0f} MiB, over 300 MiB")
    if failures:
        sys.exit("\n".join(failures))


def flood(make_client, max_calls, connections=8):
    max_calls = int(max_calls)
    clients = [make_client(100 + i) for i in range(connections)]
    pb = clients[0].pb
    request = pb.AwaitProofRequest(job_id="never-submitted", timeout_ms=2000)
    started = time.monotonic()
    refusals, lock = [], threading.Lock()

    def note(f):
        e = f.exception()
        if e is not None and e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
            with lock:
                refusals.append((time.monotonic() - started, e.details()))

    futures = []
    for i in range(2 * max_calls):
        f = clients[i % connections].future("AwaitProof", request, timeout=20)
        f.add_done_callback(note)
        futures.append(f)
    outcomes = [f.exception() for f in futures]
    served = sum(e is None for e in outcomes)
    other = [e.code().name for e in outcomes if e is not None and e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED]
    times = sorted(t for t, _ in refusals)
    say(f"flood: {2 * max_calls} AwaitProof at once over {connections} connections: {served} served, "
        f"{len(refusals)} RESOURCE_EXHAUSTED (after {times[0] if times else 0:.2f}-{times[-1] if times else 0:.2f} s), "
        f"other {other}, all done after {time.monotonic() - started:.1f} s")
    if refusals:
        say(f"  e.g. {refusals[0][1]!r}")
    if len(refusals) < max_calls:
        sys.exit(f"expected at least {max_calls} calls refused, got {len(refusals)}")
    if times[-1] > 1.0:
        sys.exit(f"a refusal took {times[-1]:.2f} s: queued, not refused")
    for c in clients:
        c.channel.close()


def deadline(client):
    pb = client.pb
    e = expect_error("AwaitProof (a day's wait, client deadline 30 s)",
                     lambda: client.call("AwaitProof", pb.AwaitProofRequest(job_id="never-submitted", timeout_ms=0), timeout=30),
                     (grpc.StatusCode.DEADLINE_EXCEEDED,), within=10.0)
    if "deadline" not in e.details():
        sys.exit("expected the gateway's own deadline")


def porep_request(pb, c1_file, miner, sector, request_id, priority=None):
    with open(c1_file, "rb") as f:
        c1 = f.read()
    return pb.SubmitProofRequest(
        request_id=request_id, proof_kind=pb.POREP_SEAL_COMMIT, sector_size=2048,
        registered_proof=STACKED_DRG_2KIB_V1_1, priority=priority if priority is not None else pb.NORMAL,
        vanilla_proof=c1, sector_number=int(sector), miner_id=int(miner))


def idempotent(client, c1_file, miner, sector):
    pb = client.pb
    request = porep_request(pb, c1_file, miner, sector, f"porep-{miner}-{sector}-retry")
    # At once, as a client retrying a call it thinks lost: both before the job can have ended.
    calls = [client.future("SubmitProof", request) for _ in range(2)]
    first, again = (c.result().job_id for c in calls)
    say(f"SubmitProof twice with request_id {request.request_id}: {first}, {again}")
    if first != again:
        sys.exit("expected the same job id for the same request_id")
    request.request_id += "-other"
    other = client.call("SubmitProof", request).job_id
    say(f"SubmitProof with request_id {request.request_id}: {other}")
    if other == first:
        sys.exit("expected another job for another request_id")


def allowed(what, call):
    """The call got past authentication and authorization (the cluster may still say no)."""
    try:
        reply = call()
        say(f"{what}: {str(reply).strip() or 'ok'}".replace("\n", ", "))
    except grpc.RpcError as e:
        if e.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
            sys.exit(f"{what}: expected to be allowed, got {e.code().name}: {e.details()}")
        say(f"{what}: allowed; the cluster says {e.code().name}: {e.details()[:120]!r}")


def auth(make_client, curio_token, other_token, ops_cert, ops_key, c1_file, miner, sector):
    codes = grpc.StatusCode
    anonymous = make_client(1)
    pb = anonymous.pb
    normal = porep_request(pb, c1_file, miner, sector, "auth-normal")
    critical = porep_request(pb, c1_file, miner, sector, "auth-critical", priority=pb.CRITICAL)
    evict = pb.EvictSrsRequest(circuit_id="porep-32g")
    for what, method, request in [("GetStatus", "GetStatus", pb.GetStatusRequest()),
                                  ("SubmitProof", "SubmitProof", normal), ("EvictSRS", "EvictSRS", evict)]:
        expect_error(f"{what} without credentials", lambda: anonymous.call(method, request), (codes.UNAUTHENTICATED,))
    stranger = make_client(2, token="not-a-token-of-this-gateway-at-all")
    expect_error("GetStatus with an unknown token", lambda: stranger.call("GetStatus", pb.GetStatusRequest()), (codes.UNAUTHENTICATED,))

    curio = make_client(3, token=curio_token)
    expect_error("SubmitProof CRITICAL by curio (submit only)", lambda: curio.call("SubmitProof", critical), (codes.PERMISSION_DENIED,))
    expect_error("EvictSRS by curio", lambda: curio.call("EvictSRS", evict), (codes.PERMISSION_DENIED,))
    job = curio.call("SubmitProof", normal).job_id
    say(f"SubmitProof NORMAL by curio over TLS with its token: job_id={job}")
    reply = curio.call("AwaitProof", pb.AwaitProofRequest(job_id=job, timeout_ms=100))
    say(f"AwaitProof {job} by curio (100 ms): {pb.AwaitProofResponse.Status.Name(reply.status)}")

    other = make_client(4, token=other_token)
    expect_error(f"CancelProof {job} by other", lambda: other.call("CancelProof", pb.CancelProofRequest(job_id=job)), (codes.PERMISSION_DENIED,))
    allowed(f"CancelProof {job} by curio", lambda: curio.call("CancelProof", pb.CancelProofRequest(job_id=job)))
    ops = make_client(5, cert=ops_cert, key=ops_key)
    allowed("EvictSRS porep-32g by ops (its client certificate, no token)", lambda: ops.call("EvictSRS", evict, timeout=60))
    allowed(f"CancelProof {job} by ops (cancel_any)", lambda: ops.call("CancelProof", pb.CancelProofRequest(job_id=job)))


def prove_beside(client, make_client, pid, c1_file, miner, sector, out):
    pb = client.pb
    started = time.monotonic()
    request = porep_request(pb, c1_file, miner, sector, f"porep-{miner}-{sector}")
    first = client.call("SubmitProof", request, timeout=60).job_id
    again = client.call("SubmitProof", request, timeout=60).job_id
    say(f"SubmitProof twice with request_id {request.request_id} ({len(request.vanilla_proof)} bytes, "
        f"lotus/Curio C1): job_id={first}, {again}")
    if first != again:
        sys.exit("expected the same job id for the same request_id")
    early = client.call("AwaitProof", pb.AwaitProofRequest(job_id=first, timeout_ms=1))
    say(f"AwaitProof (1 ms): {pb.AwaitProofResponse.Status.Name(early.status)}")
    if early.status != pb.AwaitProofResponse.TIMEOUT:
        sys.exit("expected TIMEOUT")
    huge_ids(client, pid)
    flood(lambda tag: make_client(tag, token=client.token), 8)
    anonymous = make_client(999, token=None)
    if client.token:
        expect_error("SubmitProof without credentials", lambda: anonymous.call("SubmitProof", request), (grpc.StatusCode.UNAUTHENTICATED,))
    reply = client.call("AwaitProof", pb.AwaitProofRequest(job_id=first, timeout_ms=0), timeout=600)
    name = pb.AwaitProofResponse.Status.Name(reply.status)
    say(f"AwaitProof {first}: {name} proof={len(reply.proof)} bytes total={reply.total_ms} ms "
        f"(client {time.monotonic() - started:.1f} s) error={reply.error_message!r}")
    if reply.status != pb.AwaitProofResponse.COMPLETED or len(reply.proof) != 192:
        sys.exit("expected COMPLETED with one 192-byte partition proof")
    with open(out, "wb") as f:
        f.write(reply.proof)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("proto_dir")
    parser.add_argument("--ca")
    parser.add_argument("--token")
    parser.add_argument("command")
    parser.add_argument("args", nargs="*")
    a = parser.parse_args()
    pb, pb_grpc = generate(a.proto_dir)

    def make_client(tag, token=None, cert=None, key=None):
        return Client(pb, pb_grpc, a.address, ca=a.ca, token=token, cert=cert, key=key, tag=tag)

    client = make_client(0, token=a.token)
    grpc.channel_ready_future(client.channel).result(timeout=30)
    if a.command == "huge-ids":
        huge_ids(client, *a.args)
    elif a.command == "flood":
        flood(lambda tag: make_client(tag, token=a.token), *a.args)
    elif a.command == "deadline":
        deadline(client)
    elif a.command == "idempotent":
        idempotent(client, *a.args)
    elif a.command == "auth":
        auth(make_client, *a.args)
    elif a.command == "prove-beside":
        prove_beside(client, make_client, *a.args)
    else:
        sys.exit(f"unknown command {a.command}")
    say("ok")


if __name__ == "__main__":
    main()
