#!/usr/bin/env python3
"""Sums `handoff-bench --profile report` outputs (run with HANDOFF_PROFILE_TOP=100000, so that
every sampled function is listed) into the stages of one report, for our Worker and for the
TypeScript reference (`--peer`), and prints the median µs per request of each stage over the
runs given. A function is put in a stage by its name (the rules below, first match wins), which
is an approximation: the runtime's own time inside a call (an RPC's dispatch, the event loop) is
only named by where V8 saw it.
    python3 bench/stages.py ours RUN.txt... -- peer RUN.txt...
"""
import re
import statistics
import sys

STAGES = ["edge", "admission", "hop to the object", "object's parse", "decision", "SQL writes",
          "building the answer", "row send to the owner's index", "hop back (promises, microtasks)",
          "Response", "event loop and RPC dispatch", "allocation, copies, formatting", "program, gc", "other"]

OURS = [
    ("SQL writes", r"runtime +(exec|transactionSync|sync|sql|next|raw)\b|__wbg_(exec|sync|transactionSync|from_|isSafeInteger|raw)|handoff_object::store|handoff::sqlite|worker::sql|Storage::sync|State::storage|\(anonymous, from transactionSync\)"),
    ("row send to the owner's index", r"owner_index|handoff_core::owner|row_send|handoff_core::outbox|RowSend"),
    ("Response", r"runtime +Response|respond \(entry\.mjs\)|new_with_opt_u8_array|http::Plain|http::respond"),
    ("edge", r"entry\.mjs|edge_route|handoff::router|http::Incoming|bindings::setting|runtime +(get|text|arrayBuffer|headers)\b"),
    ("admission", r"admission::admit|handoff_api::token|handoff_api::routes::find|sha2|hmac|base64|digest::"),
    ("hop to the object", r"getByName|idFromName|__wbg_handle|runtime +handle\b|__wbg_getByName"),
    ("object's parse", r"admission::read|handoff_api::input|protocol::decode|serde_json::de|handoff_core::json|Deserialize|Visitor|from_utf8|runtime +decode\b"),
    ("decision", r"handoff_core::|Decider|handoff_object::Object::(serve|finish|plan|carry_out_now|reply)|__wbg_now"),
    ("building the answer", r"handoff_api::wire|serde_json::ser|Serialize|format_escaped|handoff_api::view"),
    ("hop back (promises, microtasks)", r"future_to_promise|queueMicrotask|wasm_bindgen_futures|js_sys::futures|cb_unref|runtime +then\b|JsFuture|Promise|__wbg_of_|closures::_::invoke"),
    ("allocation, copies, formatting", r"dlmalloc|alloc::|drop_in_place|to_vec|RawVec|core::fmt|fmt::write"),
    ("event loop and RPC dispatch", r"from the event loop|wasm-to-js|js-to-wasm"),
    ("program, gc", r"\(program\)|garbage collector"),
]

PEER = [
    ("SQL writes", r"runtime +(exec|transactionSync|sync)\b|\(anonymous, from transactionSync\)|\bstore\b"),
    ("row send to the owner's index", r"\bindex\b|\bput\b"),
    ("Response", r"runtime +Response"),
    ("building the answer", r"\bjson\b|\bok\b|refusal"),
    ("edge", r"\broute\b|\bfetch\b|runtime +(get|URL|text)\b"),
    ("admission", r"\bverify\b|fromBase64url|base64url|hmacKey|runtime +(encode|importKey|sign)\b"),
    ("hop to the object", r"\bhop\b|idFromName|getByName"),
    ("object's parse", r"readJson|readReport|runtime +decode\b|JSON\.parse|runtime +parse\b"),
    ("decision", r"\breport\b|\bguard\b|anonymous, from guard|hasEnded|transition|rules|\bapply\b"),
    ("hop back (promises, microtasks)", r"runtime +then\b|queueMicrotask"),
    ("event loop and RPC dispatch", r"from the event loop|wasm-to-js"),
    ("program, gc", r"\(program\)|garbage collector"),
]

LINE = re.compile(r"^\s+([\d.]+) µs\s+[\d.]+%\s+(\S+)\s+(.*)$")


def stages(path, rules):
    sums = dict.fromkeys(STAGES, 0.0)
    busy = None
    for line in open(path, encoding="utf-8"):
        m = re.search(r"busy ([\d.]+) µs per request", line)
        if m:
            busy = float(m.group(1))
        m = LINE.match(line)
        if not m:
            continue
        us, group, name = float(m.group(1)), m.group(2), m.group(3)
        text = f"{group} {name}"
        stage = next((s for s, rule in rules if re.search(rule, text)), "other")
        sums[stage] += us
    sums["busy per request"] = busy or sum(sums.values())
    return sums


def main(argv):
    if "--" not in argv:
        sys.exit(__doc__)
    cut = argv.index("--")
    ours = [stages(p, OURS) for p in argv[1:cut] if p != "ours"]
    peer = [stages(p, PEER) for p in argv[cut + 1:] if p != "peer"]
    print(f"{'stage':<34} {'ours µs':>9} {'reference µs':>13} {'difference':>11}")
    for stage in STAGES + ["busy per request"]:
        a = statistics.median(r[stage] for r in ours)
        b = statistics.median(r[stage] for r in peer)
        print(f"{stage:<34} {a:>9.0f} {b:>13.0f} {a - b:>+11.0f}")


if __name__ == "__main__":
    main(sys.argv)
