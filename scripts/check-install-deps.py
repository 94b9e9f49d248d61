#!/usr/bin/python3
"""Checks that scripts/install-deps.sh installs every Debian package the build
and the tests use.

A developer machine gathers packages over time, so a green build there can hide
a missing install step. This script finds the files the build really used
(headers from ninja's dependency log, libraries from the link commands and from
the built binaries' dynamic dependencies, tools and CMake packages from the
CMake cache and the test configuration, Python modules the tests import), maps
each to the Debian package that owns it, and compares that set with what a
fresh machine would have after install-deps.sh: the packages it names, what
they depend on (the first alternative of each `a | b`, as apt picks on a fresh
machine), and Debian's essential and required packages.

Packages that are merely installed on this machine count for nothing, so an
extra package cannot hide a missing one.

  check-install-deps.py --build build               the check (exit 1: missing)
  check-install-deps.py --build build --self-test   removing each of a few
      packages from the list must make the check fail and name it

Exit status: 0 nothing missing, 1 something missing, 2 cannot check.
"""

import argparse
import glob
import os
import re
import shlex
import subprocess
import sys

# Packages the self-test removes one at a time: each must then be reported.
SELF_TEST_PACKAGES = ["coinor-libcbc-dev", "libgloo-dev", "libmlir-19-dev",
                      "nlohmann-json3-dev", "libabsl-dev", "clang-format-19"]

# Cache entries naming the programs that configure, build and test.
CACHE_PROGRAMS = ["CMAKE_COMMAND", "CMAKE_CTEST_COMMAND", "CMAKE_MAKE_PROGRAM",
                  "CMAKE_CXX_COMPILER", "CMAKE_C_COMPILER", "CCACHE_PROGRAM",
                  "PKG_CONFIG_EXECUTABLE", "CLEAVE_PYTHON", "LLVM_EXTERNAL_LIT",
                  "MLIR_TABLEGEN_EXE", "LLVM_TABLEGEN_EXE"]

# Interpreters' modules that the tests import (by Debian's Python).
PYTHON_MODULES = ["torch", "numpy"]


def die(message):
    print(f"check-install-deps: {message}", file=sys.stderr)
    sys.exit(2)


def run(args, **kwargs):
    return subprocess.run(args, check=False, capture_output=True, text=True,
                          **kwargs)


# --- What install-deps.sh names --------------------------------------------

def named_packages(script):
    """The words of the `packages=( ... )` array, comments dropped."""
    try:
        text = open(script, encoding="utf-8").read()
    except OSError as e:
        die(f"cannot read {script}: {e.strerror}")
    match = re.search(r"^packages=\((.*?)^\)", text, re.S | re.M)
    if not match:
        die(f"{script} has no `packages=( ... )` array")
    words = []
    for line in match.group(1).splitlines():
        words += shlex.split(line, comments=True)
    if not words:
        die(f"the packages array of {script} is empty")
    return words


# --- dpkg's database -----------------------------------------------------

def parse_status(path="/var/lib/dpkg/status"):
    """Installed packages: name -> fields we need."""
    packages = {}
    for block in open(path, encoding="utf-8", errors="replace").read().split("\n\n"):
        fields, key = {}, None
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        name = fields.get("Package")
        if not name or "install ok installed" not in fields.get("Status", ""):
            continue
        packages[name] = fields
    return packages


def dependency_groups(fields):
    """[[alternative, ...], ...] of Pre-Depends and Depends, names only."""
    groups = []
    for key in ("Pre-Depends", "Depends"):
        for group in filter(None, (g.strip() for g in fields.get(key, "").split(","))):
            alternatives = [re.sub(r"[\s(:].*", "", a.strip())
                            for a in group.split("|")]
            groups.append([a for a in alternatives if a])
    return groups


def fresh_closure(roots, status):
    """What a fresh machine has after installing `roots`."""
    providers = {}
    for name, fields in status.items():
        for provided in fields.get("Provides", "").split(","):
            provided = re.sub(r"[\s(:].*", "", provided.strip())
            if provided:
                providers.setdefault(provided, []).append(name)
    base = [n for n, f in status.items()
            if f.get("Essential") == "yes" or f.get("Priority") == "required"]
    closure, work = set(), list(roots) + base
    while work:
        name = work.pop()
        if name in closure:
            continue
        closure.add(name)
        if name in status:
            for group in dependency_groups(status[name]):
                first = group[0]
                # apt takes the first alternative; a virtual one is satisfied
                # by whatever provides it.
                work += [first] if first in status else providers.get(first, [])
        else:
            work += providers.get(name, [])
    return closure


def owners():
    """Path -> owning packages, from dpkg's file lists."""
    table = {}
    for listing in glob.glob("/var/lib/dpkg/info/*.list"):
        package = os.path.basename(listing)[:-len(".list")].split(":")[0]
        with open(listing, encoding="utf-8", errors="replace") as f:
            for line in f:
                table.setdefault(line.rstrip("\n"), set()).add(package)
    return table


def spellings(path):
    """The path as dpkg may list it: as used, resolved, and across the
    merged-/usr symlinks (/lib -> /usr/lib)."""
    forms = {path, os.path.realpath(path),
             os.path.join(os.path.realpath(os.path.dirname(path)),
                          os.path.basename(path))}
    for form in list(forms):
        for short in ("/lib", "/bin", "/sbin", "/lib64"):
            if form.startswith("/usr" + short + "/"):
                forms.add(form[len("/usr"):])
            elif form.startswith(short + "/"):
                forms.add("/usr" + form)
    return forms


# --- What the build and the tests used ------------------------------------

ABSOLUTE = re.compile(r"(?<![\w.])(/usr/[^\s;:\"'=(),]+)")


def used_files(build):
    files = set()
    deps = run(["ninja", "-C", build, "-t", "deps"])
    if deps.returncode != 0:
        die(f"`ninja -t deps` failed in {build}: {deps.stderr.strip()}")
    files |= {l.strip() for l in deps.stdout.splitlines()
              if l.startswith("    /")}
    commands = run(["ninja", "-C", build, "-t", "commands"]).stdout
    files |= set(ABSOLUTE.findall(commands))
    for lib in set(re.findall(r"(?:^|\s)-l([\w+.-]+)", commands)):
        for suffix in (".so", ".a"):
            found = run(["gcc", f"-print-file-name=lib{lib}{suffix}"]).stdout.strip()
            if found.startswith("/"):
                files.add(found)
    # The CMake files configure read (packages' config files, modules).
    ninja_file = open(os.path.join(build, "build.ninja"), errors="replace").read()
    rerun = re.search(r"^build build\.ninja: RERUN_CMAKE \|(.*)$", ninja_file, re.M)
    if rerun:
        files |= set(ABSOLUTE.findall(rerun.group(1)))
    # The programs that configure, build and test: named in the cache.
    cache = open(os.path.join(build, "CMakeCache.txt"), errors="replace").read()
    for key in CACHE_PROGRAMS:
        match = re.search(rf"^{key}:\w+=(.*)$", cache, re.M)
        if match and match.group(1).startswith("/"):
            files.add(match.group(1))
    # Interpreters and tools that ctest and lit run.
    configs = glob.glob(os.path.join(build, "**", "CTestTestfile.cmake"), recursive=True)
    configs += glob.glob(os.path.join(build, "**", "lit.site.cfg.py"), recursive=True)
    for config in configs:
        files |= set(ABSOLUTE.findall(open(config, errors="replace").read()))
    # lit runs these from LLVM's tools directory.
    files |= {f"/usr/lib/llvm-19/bin/{t}" for t in ("FileCheck", "not", "split-file", "count")}
    # Shared libraries the built programs load.
    for binary in glob.glob(os.path.join(build, "bin", "*")) + \
            glob.glob(os.path.join(build, "lib", "*.so")):
        for line in run(["ldd", binary]).stdout.splitlines():
            match = re.search(r"=> (/\S+)", line)
            if match:
                files.add(match.group(1))
    probe = run(["/usr/bin/python3", "-c",
                 "import sys, importlib\n"
                 "for m in sys.argv[1:]: print(importlib.import_module(m).__file__)"]
                + PYTHON_MODULES)
    if probe.returncode != 0:
        files.add("python-module-missing:" + probe.stderr.strip().splitlines()[-1])
    files |= set(probe.stdout.split())
    return {f for f in files if not f.startswith("/usr/local/")}


def used_packages(build, table):
    used, unowned = {}, []
    for path in sorted(used_files(build)):
        if path.startswith("python-module-missing:"):
            unowned.append(path)
            continue
        if not os.path.isfile(path):
            continue  # a directory belongs to every package with files in it
        found = set()
        for form in spellings(path):
            found |= table.get(form, set())
        for package in found:
            used.setdefault(package, path)
    return used, unowned


def missing(used, roots, status):
    closure = fresh_closure(roots, status)
    return sorted(p for p in used if p not in closure)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", required=True, help="the build directory")
    parser.add_argument("--install-script", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "install-deps.sh"))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if not os.path.isfile(os.path.join(args.build, "build.ninja")):
        die(f"no {args.build}/build.ninja: build first")

    roots = named_packages(args.install_script)
    status = parse_status()
    used, unowned = used_packages(args.build, owners())
    if unowned:
        print("check-install-deps: the tests need what no package provides here:")
        for what in unowned:
            print(f"  {what}")
        return 1

    if args.self_test:
        failures = 0
        for package in SELF_TEST_PACKAGES:
            fewer = [p for p in roots if p != package]
            gap = missing(used, fewer, status)
            ok = package in gap
            failures += not ok
            print(f"without {package}: "
                  + ("reported missing" if ok else f"NOT reported (missing: {gap})"))
        print(f"{len(SELF_TEST_PACKAGES) - failures} passed, {failures} failed")
        return 1 if failures else 0

    gap = missing(used, roots, status)
    print(f"check-install-deps: {len(used)} Debian packages used by the build "
          f"and tests; {len(roots)} named in {args.install_script}")
    if not gap:
        print("check-install-deps: every one is installed by the script")
        return 0
    print("check-install-deps: used but not installed by the script "
          "(a fresh machine fails on each):")
    for package in gap:
        print(f"  {package:<28} e.g. {used[package]}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
