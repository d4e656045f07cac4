"""Submits a job as any NATS user would — a plain core publish, exactly what
`nats pub cuzk.jobs.submit '<json>'` sends — and prints the result read from the results
subject with the same independent client (nats-py).

Usage: submit_job.py NATS_URL JOB_ID [TIMEOUT_SECONDS]
"""

import asyncio
import json
import sys

import nats


async def main(url: str, job_id: str, timeout: float) -> int:
    nc = await nats.connect(url)
    results = await nc.subscribe(f"cuzk.results.{job_id}")
    job = {
        "version": 1,
        "job_id": job_id,
        "circuit": "mimc",
        "params": {"rounds": 500, "partitions": 2},
        "input": {"utf8": "submitted by nats-py"},
    }
    await nc.publish("cuzk.jobs.submit", json.dumps(job).encode())
    await nc.flush()
    msg = await results.next_msg(timeout=timeout)
    print(msg.data.decode())
    await nc.close()
    return 0 if json.loads(msg.data)["status"] == "done" else 1


if __name__ == "__main__":
    timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 300.0
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], timeout)))
