#!/usr/bin/env python3
"""Collects one device-32g.sh run into the single JSON object docs/results/h200.json holds.

Usage: h200-results.py RESULTS_JSON LOG_DIR OUT_JSON
RESULTS_JSON is what device-32g.sh accumulated across its phases (timings, the porep prove and
drain JSON); LOG_DIR holds the phases' logs (SupraSeal's SUMMARY lines, the cluster bench's
per-partition tables). Keys whose run did not happen are left out, never invented.
"""
import glob
import json
import os
import re
import statistics
import subprocess
import sys


def variant(name):
    """A one-box run's GPU settings in words: w3l2 -> "3 workers, 2 lanes"."""
    words = {"w": "workers", "l": "lanes"}
    parts = [(m[1:], words[m[0]]) for m in re.findall(r"[wl]\d+", name)]
    return ", ".join(f"{n} {w[:-1] if n == '1' else w}" for n, w in parts) or name


def summary(path, kind):
    """SupraSeal harness SUMMARY line of `kind` as a dict of its key=value fields."""
    if not os.path.exists(path):
        return None
    for line in open(path, errors="replace"):
        if line.startswith(f"SUMMARY {kind} "):
            return dict(kv.split("=", 1) for kv in line.split()[2:] if "=" in kv)
    return None


def floats(text):
    return [float(x) for x in text.strip("[]").split(",") if x.strip()]


def host_cpu_2kib(path):
    """Median fetch + decode (ms) over the timed cluster runs' partition rows."""
    if not os.path.exists(path):
        return None
    samples, timed, header = [], False, None
    for line in open(path, errors="replace"):
        if line.startswith("cluster run"):
            timed = "warm-up" not in line
        elif line.startswith("part "):
            header = line.split()
        elif timed and header and re.match(r"^\s+\d+\s", line):
            row = dict(zip(header, line.split()))
            samples.append(float(row["fetch"]) + float(row["decode"]))
    return statistics.median(samples) if samples else None


def blob_bench(path):
    """`cuzk-load blobs` rows: MB/s up and down per object layout, with the run's shape."""
    if not os.path.exists(path):
        return None
    out = {}
    for line in open(path, errors="replace"):
        if re.match(r"^\d+ blobs of", line):
            out["run"] = line.strip()
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith(("one object", "striped")):
            conns = re.search(r"through (\d+) connection", cells[0])
            buckets = re.search(r"over (\d+) bucket", cells[0])
            if cells[0].startswith("one"):
                key = "one_object"
            elif conns:
                key = f"striped_{buckets.group(1) if buckets else 1}_buckets_{conns.group(1)}_connections"
            else:
                continue
            out[key] = {"upload_mb_s": float(cells[1]), "fetch_mb_s": float(cells[2])}
    return out or None


def debug_times(path, what):
    """Median ms of each part over a drain's partitions (the GPU node's `what` lines, e.g. "MSM
    times")."""
    if not os.path.exists(path):
        return None
    samples = {}
    for line in open(path, errors="replace"):
        if what in line:
            line = re.sub(r"\x1b\[[0-9;]*m", "", line)
            for k, v in re.findall(r"(\w+)_ms=([0-9.]+)", line):
                samples.setdefault(k, []).append(float(v))
    return {k: round(statistics.median(v), 1) for k, v in samples.items()} or None


def large_sizes(path):
    """`cuzk-gpu-check --large-logs` rows: median ms per what."""
    if not os.path.exists(path):
        return None
    out = {}
    for line in open(path, errors="replace"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith(("H pipeline", "G1 MSM")):
            out[cells[0]] = float(cells[1])
    return out or None


def params_phases(path):
    """Where the 32 GiB parameter run's time went: capture, generation phases, disk sync."""
    if not os.path.exists(path):
        return None
    out = {}
    for line in open(path, errors="replace"):
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)  # the log's colours
        fields = dict(re.findall(r"(\w+)=([0-9.]+(?:e-?[0-9]+)?)", line))
        if "matrices ready" in line and "secs" in fields:
            out["matrices"] = float(fields["secs"])
        elif "generation phases" in line:
            for k in ("basis_s", "sums_s", "sums_wait_s", "scalars_s", "engine_s", "write_s"):
                if k in fields:
                    out[k[:-2]] = float(fields[k])
        elif "synced to disk" in line and "secs" in fields:
            out["sync"] = float(fields["secs"])
        elif "parameters written" in line and "secs" in fields:
            out["generate_and_write"] = float(fields["secs"])
    return out or None


def main():
    results_path, logs, out = sys.argv[1:4]
    r = json.load(open(results_path)) if os.path.exists(results_path) else {}
    h = {}
    for key in ("params_gen_2kib_s", "params_gen_32gib_s"):
        if key in r:
            h[key] = r[key]
    if "porep_2kib" in r:
        h["porep_2kib_ms"] = round(r["porep_2kib"]["prove_ms"], 1)
        h["porep_2kib_stages_ms"] = {
            k[:-3]: round(r["porep_2kib"][k], 1)
            for k in ("h2d_ms", "spmv_ms", "h_ms", "msm_ms", "prove_min_ms")
        }
    one = summary(f"{logs}/ss2k.log", "supraseal_1circuit")
    if one:
        h["supraseal_2kib_ms"] = round(float(one["median_supraseal_s"]) * 1e3, 1)
    batch = summary(f"{logs}/ss2k.log", "supraseal_batch10")
    if batch:
        per_batch = [s + p for s, p in zip(floats(batch["synth_s"]), floats(batch["supraseal_s"]))]
        h["supraseal_batch_2kib_per_s"] = round(10 / statistics.median(per_batch), 2)
    if "one_box" in r:
        h["one_box"] = r["one_box"]
    if "throughput_2kib" in r:
        h["one_box_2kib_per_s"] = round(r["throughput_2kib"]["jobs_per_s"], 2)
    # The same jobs with other GPU settings (throughput_2kib_<variant>: w<N> workers, l<N>
    # lanes), and each run's rate from its first completion on.
    tps = {k: v for k, v in r.items() if k.startswith("throughput_2kib")}
    if tps:
        h["one_box_2kib_by_gpu_settings"] = {
            ("default" if k == "throughput_2kib" else variant(k.rsplit("_", 1)[1])): {
                "jobs": v["throughput_jobs"],
                "per_s": round(v["jobs_per_s"], 2),
                "steady_per_s": v.get("steady_jobs_per_s") and round(v["steady_jobs_per_s"], 2),
                "gpu_busy_pct": v["gpu_busy_pct"] and round(v["gpu_busy_pct"], 1),
            }
            for k, v in sorted(tps.items())
        }
    cpu = host_cpu_2kib(f"{logs}/throughput2k.log")
    if cpu is not None:
        h["gpu_node_host_cpu_2kib_ms"] = round(cpu, 1)
    # The per-partition figures are one H200's: from the one-GPU drain where it ran. Each drain
    # gives its sector time under its GPU count.
    for name in ("drain_32gib", "drain_32gib_x1"):
        d = r.get(name)
        if not d:
            continue
        for key, src, digits in (
            ("partition_32gib_ms", "partition_ms", 1),
            ("partition_32gib_steady_ms", "partition_steady_ms", 1),
            ("partition_32gib_latency_ms", "partition_latency_ms", 1),
            ("wire_bytes_32gib", "wire_bytes", 0),
            ("gpu_busy_pct", "gpu_busy_pct", 1),
            ("device_mem_peak_gib", "device_mem_peak_gib", 1),
            ("blob_upload_mb_s", "blob_upload_mb_s", 0),
            ("blob_fetch_mb_s", "blob_fetch_mb_s", 0),
            (f"sector_32gib_x{d['gpus']}_s", "sector_s", 2),
        ):
            # A sampler that could not run (no nvidia-smi) leaves null: the key stays out.
            if d.get(src) is not None:
                h[key] = round(d[src], digits) if digits else int(d[src])
        h[name] = d
        log = f"{logs}/{'drain32x1' if name.endswith('x1') else 'drain32'}.log"
        suffix = "_x1" if name.endswith("x1") else ""
        msms = debug_times(log, "MSM time")
        if msms:
            h["msm_32gib_ms" + suffix] = msms
    large = large_sizes(f"{logs}/large.log")
    if large:
        h["kernels_2_27_ms"] = large
    phases = params_phases(f"{logs}/params32.log")
    if phases:
        h["params_gen_32gib_phases_s"] = phases
    probe = f"{logs}/disk-probe.log"
    if os.path.exists(probe):
        h["disk_write_probe"] = open(probe).read().strip()
    bench = blob_bench(f"{logs}/blobs.log")
    if bench:
        h["blob_bench"] = bench
        in_flight_4 = blob_bench(f"{logs}/blobs-4.log")
        if in_flight_4:
            bench["in_flight_4"] = in_flight_4
        for n in (1, 4):
            memory = blob_bench(f"{logs}/blobs-memory-{n}.log")
            if memory:
                bench[f"memory_storage_in_flight_{n}"] = memory
        for path in sorted(glob.glob(f"{logs}/blobs-nats-*-*.log")):
            version, n = re.match(r".*/blobs-nats-(.+)-(\d+)\.log$", path).groups()
            rows = blob_bench(path)
            if rows:
                bench.setdefault("nats_server", {})[f"{version}_in_flight_{n}"] = rows
    ss32 = summary(f"{logs}/ss32.log", "supraseal_1circuit")
    if ss32:
        h["supraseal_32gib_ms"] = round(float(ss32["median_supraseal_s"]) * 1e3, 1)
        # The one-partition prove the budgets are compared with (same C1, same parameters).
        h["supraseal_32gib_partition_ms"] = h["supraseal_32gib_ms"]
    # The drain at each device memory budget (device-32g.sh step `budgets`).
    budgets = {}
    for key, d in sorted(r.items()):
        if not key.startswith("budget_") or not isinstance(d, dict):
            continue
        gib = lambda v: None if v is None else round(v, 2)
        budgets[key[len("budget_"):]] = {
            "partition_32gib_ms": round(d["partition_ms"], 1),
            "partition_steady_ms": round(d["partition_steady_ms"], 1),
            "device_peak_gib": gib(d.get("device_mem_peak_gib")),
            "h2d_bytes_per_partition": None if d.get("h2d_bytes_per_partition") is None else round(d["h2d_bytes_per_partition"]),
            "host_rss_gib": gib(d.get("gpu_node_rss_gib")),
            "gpu_busy_pct": d.get("gpu_busy_pct"),
            "plan": d.get("plan"),
            # Medians of the node's MSM times: H's a partition, L's, A's and B's a batch.
            "msms": d.get("msms"),
        }
    if budgets:
        h["budgets"] = budgets
    # Witness generation of partition 0 by the native generator and by the gadgets, the same
    # run, checked equal (device-32g.sh step witness); the real 2 KiB C1's beside it.
    def both_paths(prefix, w):
        h[f"{prefix}_core_s"] = round(w["native_witness_core_s"], 2)
        h[f"{prefix}_gadget_core_s"] = round(w["witness_synth_core_s"], 2)
        h[f"{prefix}_native_ms"] = round(w["native_witness_ms"], 1)

    w = r.get("witness_32gib")
    if w:
        both_paths("witness_32gib", w)
        h["witness_32gib_native_1t_ms"] = round(w["native_witness_1t_ms"], 1)
    if r.get("witness_2kib"):
        h["witness_2kib"] = r["witness_2kib"]
    # A synthetic 32 GiB WindowPoSt partition's witness, both paths (step postwit).
    post = r.get("window_post_32gib")
    if post:
        both_paths("window_post_32gib", post)
    # A synthetic 32 GiB SnapDeals partition's witness, both paths (step snapwit).
    snap = r.get("snap_32gib")
    if snap:
        both_paths("snap_32gib", snap)
        h["snap_32gib_gadget_ms"] = round(snap["witness_synth_ms"], 1)
    # Synthetic 32 GiB sectors through one host (synth node + GPU node, step onebox32).
    one32 = r.get("one_box_32gib")
    if one32:
        h["one_box_32gib_sector_s"] = round(one32["sector_s"], 2)
        h["one_box_32gib_host_rss_gib"] = round(one32["host_rss_gib"], 1)
        h["one_box_32gib_synth_core_s"] = round(one32["synth_core_s_per_partition"], 2)
        h["one_box_32gib_gpu_busy_pct"] = one32["gpu_busy_pct"]
        h["one_box_32gib"] = one32
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True,
        ).stdout.strip().splitlines()
    except FileNotFoundError:
        smi = []
    h["measured_at"] = {
        "date": subprocess.run(["date", "-u", "+%Y-%m-%dT%H:%MZ"], capture_output=True, text=True).stdout.strip(),
        "device": f"{len(smi)} x {smi[0].split(',')[0].strip()}" if smi else "unknown",
        "driver": smi[0].split(",")[1].strip() if smi else "unknown",
        "cpus": os.cpu_count(),
    }
    json.dump(h, open(out, "w"), indent=1, sort_keys=True)
    print(json.dumps(h, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
