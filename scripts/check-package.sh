#!/usr/bin/env bash
# CI check that the package works as a user gets it: `npm pack`, install the tarball into an empty
# project, type-check an import of every export, run the CLI there, and check what it does without
# optional drivers and on an unsupported Node.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
serve=
# A server the check started never outlives it, whatever fails.
trap '[ -z "$serve" ] || kill -KILL "$serve" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "check-package: $*" >&2; exit 1; }
node24="$root/node_modules/node/bin/node"
system_node=$(PATH=/usr/local/bin:/usr/bin:/bin command -v node || true)

cd "$root"
tarball=$(npm pack --silent --pack-destination "$work" | tail -n 1)
tar -tzf "$work/$tarball" | sed 's#^package/##' >"$work/files"
for file in package.json README.md LICENSE CHANGELOG.md bin/idmint.js dist/index.js dist/index.d.ts dist/cli/main.js dist/dashboard/index.html; do
  grep -qx "$file" "$work/files" || fail "$file is missing from the package"
done
grep -qE '^dist/dashboard/app-[A-Z0-9]+\.js$' "$work/files" || fail "the dashboard's bundle is missing from the package"
! grep -E '^dist/dashboard/.*\.(tsx?|map)$' "$work/files" || fail "the package holds the dashboard's sources"

! grep -E '(^src/|\.test\.|^test/|^bench/|^scripts/|^data/)' "$work/files" || fail "the package holds files that are not for users"

# No install-time script reaches a consumer: npm runs preinstall, install and postinstall (and
# `node-gyp rebuild` for a binding.gyp) when it installs a package, and runs or flags prepare for
# one installed from a tarball or git. The package ships built (prepack runs the build).
tar -xzf "$work/$tarball" -C "$work" package/package.json
scripts=$(node -e '
  const { scripts = {} } = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
  console.log(["preinstall", "install", "postinstall", "prepare"].filter((name) => name in scripts).join(" "));
' "$work/package/package.json")
[ -z "$scripts" ] || fail "the packed package.json has install-time scripts: $scripts"
! grep -qx 'binding.gyp' "$work/files" || fail "the package holds a binding.gyp (npm would run node-gyp on install)"

mkdir "$work/app"
cd "$work/app"
npm init -y >/dev/null
npm install --no-audit --no-fund --loglevel=error "$work/$tarball" "@types/node@24" >/dev/null
for driver in pg mysql2 ioredis etcd3 node-zookeeper-client; do
  [ ! -e "node_modules/$driver" ] || fail "npm install idmint pulled the optional driver $driver"
done

# An import of every subpath export, type-checked against the shipped .d.ts (skipLibCheck off).
node -e '
  const { exports } = require("./node_modules/idmint/package.json");
  const lines = Object.keys(exports).filter((k) => k !== "./package.json")
    .map((k, i) => `import * as m${i} from "${k === "." ? "idmint" : "idmint/" + k.slice(2)}";\nconsole.log(Object.keys(m${i}).length);`);
  require("node:fs").writeFileSync("check.ts", lines.join("\n") + "\n");
'
cat >tsconfig.json <<'JSON'
{ "compilerOptions": { "module": "nodenext", "moduleResolution": "nodenext", "target": "es2023", "strict": true, "noEmit": true, "skipLibCheck": false, "types": ["node"] }, "files": ["check.ts"] }
JSON
"$root/node_modules/.bin/tsc" -p . || fail "the package's type declarations do not type-check"

# Every export loads, and the library works, on Node 24 outside the repository.
PATH="$(dirname "$node24"):$PATH"
node --input-type=module -e '
  import { SnowflakeGenerator, ManualClock, decomposeId } from "idmint";
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const g = new SnowflakeGenerator({ clock, workerId: 3 });
  const id = g.next();
  if (decomposeId(id, g.layout).workerId !== 3) throw new Error("decode");
' || fail "the library does not work from the installed package"
sed 's/^import \* as m\([0-9]*\) from \(.*\);$/await import(\2);/;/console.log/d' check.ts >load.mjs
node load.mjs || fail "an export does not load"

npx --no-install idmint --help | grep -q "Usage: idmint" || fail "npx idmint --help"
set +e
out=$(npx --no-install idmint tags list --store postgres://127.0.0.1:5432/test 2>&1)
code=$?
set -e
[ "$code" -eq 1 ] && [[ "$out" == *"npm install pg"* ]] || fail "a missing driver gave exit $code: $out"

# The installed package serves its dashboard: the page at / and the bundle it names, nothing from
# outside the package (an embedded store and a static worker in a directory of the check's own).
port=$(node -e "const s=require('node:net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
# The installed bin itself, not `npx idmint serve`: npx does not pass SIGTERM on, so the server
# would outlive the check.
IDMINT_PORT="$port" IDMINT_SEGMENT_STORE="sqlite:$work/dashboard.db" IDMINT_WORKER_STATE_DIR="$work" node_modules/.bin/idmint serve >"$work/serve.log" 2>&1 &
serve=$!
for _ in $(seq 1 150); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
page=$(curl -fs "http://127.0.0.1:$port/") || { cat "$work/serve.log" >&2; fail "the installed package does not serve its dashboard at /"; }
bundle=$(printf '%s' "$page" | grep -oE '/dashboard/app-[A-Z0-9]+\.js' | head -n 1)
[ -n "$bundle" ] && curl -fs -o /dev/null "http://127.0.0.1:$port$bundle" || fail "the dashboard page names a bundle the server does not serve: '$bundle'"
kill -TERM "$serve"
status=0
wait "$serve" || status=$?
serve=
[ "$status" -eq 0 ] || { cat "$work/serve.log" >&2; fail "idmint serve exited with $status after SIGTERM"; }

# An unsupported Node gets one line naming the version needed, from the CLI and the library.
if [ -n "$system_node" ] && ! "$system_node" -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>22||(a===22&&b>=13)?0:1)'; then
  set +e
  out=$("$system_node" node_modules/idmint/bin/idmint.js --help 2>&1); code=$?
  lib=$("$system_node" --input-type=module -e 'import("idmint").catch((e) => { console.log(e.message); })' 2>&1)
  set -e
  [ "$code" -eq 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && [[ "$out" == *"needs Node.js 22.13.0 or later"* ]] || fail "the CLI on Node $("$system_node" --version): exit $code, $out"
  [[ "$lib" == "idmint needs Node.js 22.13.0 or later"* ]] || fail "the library on Node $("$system_node" --version): $lib"
  echo "check-package: Node $("$system_node" --version) is refused with one line"
fi
echo "check-package: $tarball installs without drivers, type-checks, loads every export, runs its CLI and serves its dashboard"
