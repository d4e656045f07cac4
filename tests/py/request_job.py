"""Submits jobs the way `nats req cuzk.jobs.submit '<json>'` does — a request whose reply is
the JetStream server's acknowledgement — and prints each reply as one JSON line.

Usage: request_job.py NATS_URL JOB_ID [JOB_ID...]
"""

import asyncio
import json
import sys

import nats


async def main(url: str, job_ids: list) -> int:
    nc = await nats.connect(url)
    for job_id in job_ids:
        job = {
            "version": 1,
            "job_id": job_id,
            "circuit": "mimc",
            "params": {"rounds": 64, "partitions": 1},
            "input": {"utf8": "requested by nats-py"},
        }
        reply = await nc.request("cuzk.jobs.submit", json.dumps(job).encode(), timeout=10)
        print(reply.data.decode())
    await nc.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2:])))
