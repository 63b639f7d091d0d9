# Sourced by every script: where the tools live and how they are told not to download.
# shellcheck shell=bash
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$top/node_modules/.bin:$HOME/.cargo/bin:$PATH"
export WRANGLER_SEND_METRICS=false
# worker-build downloads its helpers unless pointed at installed ones; downloads fail here.
export WASM_BINDGEN_BIN="$HOME/.cargo/bin/wasm-bindgen"
export ESBUILD_BIN="$top/node_modules/.bin/esbuild"
export WASM_OPT_BIN="$top/node_modules/.bin/wasm-opt"
# The tool versions scripts/install provides.
WORKER_BUILD_VERSION=0.8.7
locked_version() { # the version of crate $1 in Cargo.lock
  awk -v name="$1" '$0 == "name = \"" name "\"" { getline; gsub(/version = |"/, ""); print; exit }' "$top/Cargo.lock"
}
# The development signing key: public by design, used when HANDOFF_SIGNING_KEY is unset.
# Only a local Worker (HANDOFF_ENV=local, which only local runs set, with --var) accepts it;
# every other environment, and a Worker whose HANDOFF_ENV is absent or unknown, refuses it.
DEV_SIGNING_KEY="handoff-development-key-do-not-deploy"
# The development VAPID key pair (Web Push), public by design like the signing key above: its
# text says what it is, and every environment but local refuses it (push answers 503).
DEV_VAPID_PRIVATE_KEY="handoff-development-push-key-do-not-deploy0"
# A fresh secret signing key: 64 hex characters (32 random bytes), over the 32 bytes that
# environments other than local require.
random_signing_key() { python3 -c 'import secrets; print(secrets.token_hex(32))'; }
