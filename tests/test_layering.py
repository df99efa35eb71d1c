#!/usr/bin/env python3
"""The source tree's layers (docs/design.md, "Source layout"): each folder's
files include only from the folders below it; the public headers
(include/gpubridge/) are self-contained: they include standard and CUDA
headers as <...> and each other as "gpubridge/...", nothing of runtime/,
server/ or grains/, so that they build from an install prefix; no file of
the runtime, the server or the daemon names a built-in grain type, and no device code
dispatches on a grain kind: each type's kernels are templates specialised on
its handler (include/gpubridge/grain.h), so a kernel never switches on, or
compares, a kind, nor calls a handler chosen by one. The kernel profile and
the kernel switches exist only in benchmark builds: outside profile.cuh,
device code reads no clock, touches no prof_* counter but through
gbk_prof_add, and tests a GBK_F_* switch only through gbk_flag.

    include/   the public API (gpubridge/grain.h, gpubridge/runtime.h) and the
               grain SDK they need (ring.h, mail.h, team.h; detail/: the grain
               table and dispatch step; device/: the kernels a grain instantiates)
    runtime/   rings, registry, backends, config
    grains/    the built-in grain types, on the public API (their own tests,
               grains/<name>/test_*.c, are tests and not checked)
    server/    the ZeroMQ server: wire, codecs, control, CURVE, metrics
    embed/     the embedding API
    bridge/    the daemon: main, supervisor, reload

Usage: test_layering.py SOURCE_DIR. Exits 1 with one line per violation."""
import os
import re
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
EXT = (".c", ".h", ".cu", ".cuh")

# What each layer may include from the project (besides its own folder and
# the generated protobuf headers); anything not listed is refused.
ALLOWED = {
    "include": {"include"},  # and standard headers: public_includes()
    "runtime": {"include", "runtime"},
    "grains": {"include", "grains", "proto", "runtime:log.h"},
    "server": {"include", "runtime", "server", "proto"},
    "embed": {"include", "runtime", "embed"},
    "bridge": {"include", "runtime", "server", "bridge", "proto"},
}
# The runtime's headers a grain may use besides the public ones: the log.
GRAIN_RUNTIME = {"log.h"}
# The one file of grains/ that fills the runtime's tables of built-in types.
GLUE = {"grains/builtin_grains.c": {"config.h", "grain_registry.h"}}
# The grep: not even a comment of the core names a built-in type.
BUILTIN_WORD = re.compile(r'\b(echo|vecadd|pagerank)\b', re.IGNORECASE)
BUILTIN_NAME = re.compile(r'"(echo|vecadd|pagerank\.(sender|aggregator))"|\bGB_(ECHO|VECADD|PR)_\w+|'
                          r'\bgbi?_(codec_(echo|vecadd|pr)|grain_(echo|vecadd|pagerank))\w*')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Headers the build generates into include/gpubridge/ (embed/version.h.in).
GENERATED = {"gpubridge/version.h"}
# Device code: every file of include/gpubridge/device/, and the headers the
# kernels compile besides them (grain.h, the ring, mail and team headers, detail/).
DEVICE_DIR = "include/gpubridge/device"
DEVICE_HEADERS = ["include/gpubridge/grain.h"] + [f"include/gpubridge/{h}" for h in (
    "ring.h", "mail.h", "team.h", "detail/grain_table.h", "detail/dispatch.h", "detail/large_payload.h")]
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)
KIND = r"(?:\w+(?:\.|->))?kind\b"  # kind, a.kind, args->kind
KIND_DISPATCH = re.compile(
    rf"\bswitch\s*\(\s*{KIND}"                          # switch (a.kind)
    rf"|\b{KIND}\s*[=!]=|[=!]=\s*{KIND}"                   # kind == GB_..., GB_... != kind
    rf"|\[\s*{KIND}\s*\]\s*\("                             # handlers[kind](...)
    r"|\bgb_grain_on_message\s*\("                         # the handler of a kind
    rf"|\b\w*(?:on_message|dispatch)\w*\s*\([^;]*?\b{KIND}")  # gbi_dispatch_one(a.kind, ...)
# Benchmark-only device code (device/profile.cuh): a clock read, a
# prof_* counter not handed to gbk_prof_add, a GBK_F_* switch not tested by
# gbk_flag.
PROFILE_FILE = "include/gpubridge/device/profile.cuh"
PROFILE_ALLOWED = re.compile(r"gbk_prof_add<G>\(\s*ks\.prof_\w+|gbk_flag<G>\(\s*a\s*,\s*GBK_F_\w+\s*\)")
PROFILE_CODE = re.compile(r"\bclock64\s*\(|\bclock\s*\(|%globaltimer|%clock|\bprof_\w+|\bGBK_F_\w+")
# One clock read that shipped kernels need: the device links' hold bound
# (messaging.hold_ms), read by gbk_now_ns in link.cuh alone.
HOLD_CLOCK = ("include/gpubridge/device/link.cuh", "%globaltimer")


def layer_of(rel):
    top = rel.split("/", 1)[0]
    return top if top in ALLOWED else None


def index_headers():
    """Header name (as included) -> the layers that hold a file of that name."""
    where = {}
    for top in ALLOWED:
        for root, _, files in os.walk(os.path.join(SRC, top)):
            for f in files:
                if f.endswith(EXT):
                    rel = os.path.relpath(os.path.join(root, f), os.path.join(SRC, top))
                    where.setdefault(f, set()).add(top)
                    where.setdefault(rel, set()).add(top)
    for f in os.listdir(os.path.join(SRC, "proto")):
        if f.endswith(".h") or f.endswith(".proto"):
            where.setdefault(f.replace(".proto", ".pb-c.h"), set()).add("proto")
    # A grain's schema is in its folder: its generated header belongs to grains/.
    for root, _, files in os.walk(os.path.join(SRC, "grains")):
        for f in files:
            if f.endswith(".proto"):
                where.setdefault(f.replace(".proto", ".pb-c.h"), set()).add("grains")
    return where


def is_grain_test(name):
    """A built-in grain's own tests (grains/<name>/test_*.c and the *_cases.h
    they share) are tests: they drive the grain through the runtime, as
    tests/ does, and are not part of the grain's layer."""
    return name.startswith("test_") or name.endswith("_cases.h")


def without_comments(text):
    """text with its comments blanked (line numbers kept)."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def device_files():
    files = list(DEVICE_HEADERS)
    for root, _, names in os.walk(os.path.join(SRC, DEVICE_DIR)):
        files += [os.path.relpath(os.path.join(root, f), SRC) for f in sorted(names) if f.endswith(EXT)]
    return files


def kind_dispatch():
    """One line per place where device code dispatches on a grain kind."""
    bad = []
    for rel in device_files():
        path = os.path.join(SRC, rel)
        if not os.path.exists(path):
            bad.append(f"{rel}: missing (a device source test_layering.py checks)")
            continue
        code = without_comments(open(path, encoding="utf-8").read())
        for n, line in enumerate(code.splitlines(), 1):
            m = KIND_DISPATCH.search(line)
            if m:
                bad.append(f"{rel}:{n}: dispatches on a grain kind in '{m.group(0).strip()}' (a kernel is a "
                           f"template on one type's traits: GB_DEFINE_GRAIN, grain_kernels.cuh)")
    return bad


def profile_code():
    """One line per place where device code outside profile.cuh profiles or
    tests a kernel switch."""
    bad = []
    for rel in device_files():
        path = os.path.join(SRC, rel)
        if rel == PROFILE_FILE or not os.path.exists(path):
            continue
        code = without_comments(open(path, encoding="utf-8").read())
        for n, line in enumerate(code.splitlines(), 1):
            if re.match(r"\s*#\s*define\s+GBK_F_", line) or re.match(r"\s*uint64_t\s+prof_", line):
                continue  # the switches' and counters' definitions (ring_kernel.h)
            m = PROFILE_CODE.search(PROFILE_ALLOWED.sub("", line))
            if m and (rel, m.group(0)) == HOLD_CLOCK and code.count(HOLD_CLOCK[1]) == 1 and "gbk_now_ns(void)" in code:
                continue
            if m:
                bad.append(f"{rel}:{n}: '{m.group(0)}' outside {PROFILE_FILE} (the profile and the kernel "
                           f"switches are for benchmark builds only: gbk_clock, gbk_prof_*, gbk_flag)")
    return bad


def public_includes(where):
    """One line per include of a public header that is neither a standard or
    CUDA header (<...>) nor another public header ("gpubridge/...")."""
    bad = []
    internal = {name for name, layers in where.items() if layers - {"include"}}
    for root, _, files in os.walk(os.path.join(SRC, "include")):
        for f in sorted(files):
            if not f.endswith(EXT):
                continue
            rel = os.path.relpath(os.path.join(root, f), SRC)
            text = without_comments(open(os.path.join(root, f), encoding="utf-8").read())
            for quote, inc in ANY_INCLUDE.findall(text):
                if not inc.startswith("gpubridge/"):
                    if quote == "<" and inc not in internal:
                        continue  # a standard or CUDA header
                    shown = f"<{inc}>" if quote == "<" else f'"{inc}"'
                    bad.append(f"{rel}: includes {shown} (a public header includes the others as "
                               f"\"gpubridge/...\", system headers as <...>)")
                elif inc not in GENERATED and not os.path.isfile(os.path.join(SRC, "include", inc)):
                    bad.append(f"{rel}: includes \"{inc}\", which is not a public header (include/{inc})")
    return bad


def resolved_layer(own, inc):
    """The layer of the file an include names relative to its own folder
    (None: it names none)."""
    path = os.path.normpath(os.path.join(own, inc))
    if not os.path.isfile(path):
        return None
    rel = os.path.relpath(path, SRC)
    return rel.split("/", 1)[0] if not rel.startswith("..") else "outside"


def main():
    where = index_headers()
    bad = kind_dispatch() + profile_code() + public_includes(where)
    for top in ALLOWED:
        for root, _, files in os.walk(os.path.join(SRC, top)):
            for f in sorted(files):
                if not f.endswith(EXT) or (top == "grains" and is_grain_test(f)):
                    continue
                path = os.path.join(root, f)
                rel = os.path.relpath(path, SRC)
                text = open(path, encoding="utf-8").read()
                own = os.path.dirname(path)
                for inc in INCLUDE.findall(text):
                    local = resolved_layer(own, inc)
                    if local == top:
                        continue  # its own folder
                    layers = {local} if local else (where.get(inc) or where.get(os.path.basename(inc)))
                    if not layers:
                        continue  # generated (version.h) or a system header in quotes
                    ok = ALLOWED[top]
                    if layers & ok:
                        continue
                    if "runtime:log.h" in ok and "runtime" in layers and os.path.basename(inc) in GRAIN_RUNTIME:
                        continue
                    if inc in GLUE.get(rel, ()):
                        continue
                    bad.append(f"{rel}: includes \"{inc}\" from {', '.join(sorted(layers))}/ "
                               f"({top}/ may include from {', '.join(sorted(ok))})")
                if top in ("runtime", "server", "bridge", "embed"):
                    for n, line in enumerate(text.splitlines(), 1):
                        m = BUILTIN_NAME.search(line) or BUILTIN_WORD.search(line)
                        if m:
                            bad.append(f"{rel}:{n}: names the built-in grain type in '{m.group(0)}' "
                                       f"(built-in types live in grains/)")
    for b in bad:
        print(b)
    print(f"layering: {len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
