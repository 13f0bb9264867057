"""brainmem 0.3.0 from PyPI, measured beside brain: installed into a venv of its own under var/
(never a dependency of brain) and loaded with the same facts. Used by the recall and the hook
benchmarks; if PyPI cannot be reached they report ours alone and say why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from brain import embedded

BRAINMEM = "brainmem==0.3.0"
BRAINMEM_VENV = embedded.VAR_DIR / "bench-brainmem"

# Run inside brainmem's venv: its own schema and embedder, rows written in one transaction.
BRAINMEM_LOADER = """
import json, sys, time
import brainmem
rows = json.load(open(sys.argv[1]))
memory = brainmem.Memory(sys.argv[2])
now = time.time()
values = []
for start in range(0, len(rows), 5000):
    chunk = rows[start:start + 5000]
    vectors = memory.emb.embed([text for text, _, _ in chunk])
    for (text, confidence, support), vector in zip(chunk, vectors):
        values.append((brainmem._subject(text), text, confidence, support, now, now, now,
                       "fact", "[]", vector.astype("float32").tobytes()))
memory.db.executemany(
    "INSERT INTO facts (subject, proposition, confidence, support, created_at, valid_from,"
    " last_used, valence, provenance, embedding) VALUES (?,?,?,?,?,?,?,?,?,?)", values)
memory.db.commit()
print(memory.db.execute("SELECT count(*) FROM facts WHERE valid_to IS NULL").fetchone()[0])
"""


def brainmem_cli() -> tuple[Path | None, str]:
    """brainmem's CLI in its own venv under var/, installed from PyPI on first use; or None
    and why not."""
    cli = BRAINMEM_VENV / "bin" / "brainmem"
    if cli.exists():
        return cli, ""
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", str(BRAINMEM_VENV)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        pip = subprocess.run(
            [str(BRAINMEM_VENV / "bin" / "pip"), "install", "--quiet", BRAINMEM],
            capture_output=True,
            text=True,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"a venv for it could not be made ({error})"
    if pip.returncode != 0 or not cli.exists():
        said = (pip.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"`pip install {BRAINMEM}` failed (PyPI unreachable?): {said}"
    return cli, ""


def load(cli: Path, rows: list, folder: Path) -> Path:
    data, store = folder / "facts.json", folder / "brainmem.db"
    data.write_text(json.dumps(rows))
    python = cli.parent / "python"
    loaded = subprocess.run(
        [str(python), "-c", BRAINMEM_LOADER, str(data), str(store)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    assert int(loaded.stdout.strip()) == len(rows), loaded.stdout
    return store
