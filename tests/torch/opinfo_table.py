"""Makes docs/torch-ops.md's tables from the reports of test_opinfo.py (TRN_OPINFO_OPS=all
TRN_OPINFO_REPORT=<ops.jsonl>) and test_module_db.py (TRN_MODULE_DB=all
TRN_OPINFO_REPORT=<modules.jsonl>): one row per op (or module and mode), its status, the samples
compared and what ran on the CPU.

    .venv/bin/python tests/torch/opinfo_table.py <ops.jsonl> <modules.jsonl> > docs/torch-ops.md
"""
import collections
import json
import sys

HEADER = """# PyTorch ops on trn: the OpInfo sweep

PyTorch's OpInfo database (`op_db`, which ships in the 2.13 wheel) run on trn by
`tests/torch/test_opinfo.py` through `common_device_type`'s `PrivateUse1TestBase`: for each op
that takes float32, up to {samples} of its sample inputs, forward and (where the op has autograd)
backward, on trn and on the CPU, compared (forward within 1e-4 relative and 1e-5 absolute,
gradients within 1e-3 and 1e-4). Made with `TRN_OPINFO_OPS=all TRN_OPINFO_REPORT=r.jsonl
.venv/bin/python -m unittest tests/torch/test_opinfo.py` and `tests/torch/opinfo_table.py`;
CI runs a fixed set of {ci} ops (`make test`, `torch.test_opinfo`).

Status: **device**: every compared sample matched with nothing on the CPU; **CPU fallback**:
matched, with the listed ops (or libtrn_ops' host runs, `trn_ops::`) run on the CPU, recorded by
`torch_trn.fallback_ops()`; **random**: the CPU's own results differ between two seeds (the op draws
random numbers, and trn's generator is not the CPU's), so nothing was compared; **not compared**: PyTorch's own OpInfo turns
off its CPU comparison for the op (random draws, uninitialized memory, views that depend on the
storage's layout); **refused**: the op needs a dtype trn tensors cannot hold (complex, uint64),
refused with a message that names the dtypes trn has; **wrong**: a result differed from the
CPU's (a bug); **error**: trn raised where the CPU did not (not silent, but not done). The
fallbacks listed are all that ran on the CPU while the op's samples were made and run, backward
included: making a sample on trn can itself use some (`_index_put_impl_`, `trn_ops::sum`).

{summary}

| op | status | samples | ran on the CPU / first difference or error |
|---|---|---|---|
"""


MODULES = """
## torch.nn modules

`tests/torch/test_module_db.py` runs PyTorch's module database (`common_modules.module_db`) the
same way: each module made on the CPU from up to {inputs} of its constructor inputs, in training
and in evaluation mode, moved to trn with `.to()`, run forward and backward on both; outputs,
the gradients of its parameters and inputs, and its buffers (running statistics) compared.
Modules whose CPU output depends on the seed (dropout inside) are "random". CI runs {ci} of
them.

{summary}

| module (mode) | status | inputs | ran on the CPU / first difference or error |
|---|---|---|---|
"""


def table(rows):
    counts = collections.Counter()
    lines = []
    for r in sorted(rows, key=lambda r: (r["op"], r["variant"])):
        name = r["op"] + (f" ({r['variant']})" if r["variant"] else "")
        if r["status"] == "pass":
            if r["compared"] == 0 and r["random"]:
                status = "random"
            elif r["compared"] == 0:
                status = "no sample"
            else:
                status = "CPU fallback" if r.get("fallbacks") else "device"
        else:
            status = r["status"]
        counts[status] += 1
        note = r.get("detail", "") or ", ".join(f"`{f}`" for f in r.get("fallbacks", []))
        note = note.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{name}` | {status} | {r['compared']} | {note} |")
    summary = ", ".join(f"{status}: {n}" for status, n in counts.most_common())
    return summary, "\n".join(lines) + "\n"


def main(ops_report, modules_report):
    # The sweeps' own settings, for the text.
    from sweep_support import CI_MODULES, CI_OPS, MAX_INPUTS, MAX_SAMPLES
    rows = [json.loads(line) for line in open(ops_report)]
    summary, lines = table(rows)
    sys.stdout.write(HEADER.format(samples=MAX_SAMPLES, ci=len(CI_OPS),
                                   summary=f"{len(rows)} ops and variants: {summary}."))
    sys.stdout.write(lines)
    rows = [json.loads(line) for line in open(modules_report)]
    summary, lines = table(rows)
    sys.stdout.write(MODULES.format(inputs=MAX_INPUTS, ci=len(CI_MODULES),
                                    summary=f"{len(rows)} modules and modes: {summary}."))
    sys.stdout.write(lines)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
