import os
import lit.formats
from lit.llvm import llvm_config

config.name = "Cleave"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.cleave_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.suffixes = [".mlir"]
# A FileCheck variable captured under one CHECK-LABEL is not visible in the next.
config.environment["FILECHECK_OPTS"] = "-enable-var-scope"

config.substitutions.append(("%cleave_src", config.cleave_src_root))
config.substitutions.append(("%cleave_lib", os.path.join(config.cleave_obj_root, "lib")))
config.substitutions.append(("%host_cc", config.host_cc))
config.substitutions.append(("%python", "/usr/bin/python3"))
# Benchmarks and tests pin BLAS threads: two cores, several tests at once.
config.environment["OPENBLAS_NUM_THREADS"] = "1"
# cleave-run's compile cache lives in the build tree, not in the user's.
config.environment["CLEAVE_COMPILE_CACHE_DIR"] = os.path.join(
    config.cleave_obj_root, "test", "compile-cache")
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["cleave-opt", "cleave-models", "cleave-run", "cleave-plan", "cleave-estimate",
     "cleave-bench-ops", "cleave-bench-train-step", "cleave-bench-verify",
     "cleave-bench-collectives", "FileCheck", "not", "split-file", "count"],
    [config.cleave_tools_dir, config.llvm_tools_dir])
