# -*- Python -*-
# lit configuration for mtc: FileCheck tests over mtc, mtc-opt and the examples.
import os
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "mtc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)

# A build with MTC_SANITIZE: features `asan` / `ubsan`, and every test fails
# on a sanitizer report (SanitizedShTest).
if getattr(config, "sanitize", ""):
    # The format is a module of its own: lit's workers receive it pickled,
    # which needs a class they can import by name.
    sys.path.insert(0, os.path.dirname(__file__))
    from litsanitize import SanitizedShTest

    config.test_format = SanitizedShTest(
        not llvm_config.use_lit_shell,
        os.path.join(config.llvm_tools_dir, "llvm-symbolizer"))
    if "address" in config.sanitize:
        config.available_features.add("asan")
    if "undefined" in config.sanitize:
        config.available_features.add("ubsan")
config.suffixes = [".mt", ".mlir", ".test"]
config.excludes = ["unit", "fuzz", "fixtures", "Inputs", "CMakeLists.txt",
                   "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mtc_obj_root, "test")

config.substitutions.append(("%mtc_src_root", config.mtc_src_root))
config.substitutions.append(("%examples", os.path.join(config.mtc_src_root, "examples")))
# The Python running lit (standard library only), for tests that edit copies
# of fixtures (test/parity).
config.substitutions.append(("%python", sys.executable))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.mtc_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tool_dirs = [config.mtc_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["mtc", "mtc-run", "mtc-opt", "mtc-parity"], tool_dirs)

# Data-parallel tests (REQUIRES: mpi) run two ranks with Open MPI's mpirun
# where libmtc-mpi.so was built; %mpirun2 oversubscribes (two ranks on any
# machine) and allows root (CI containers run as root).
if config.mpi_found in ("TRUE", "ON", "1", "True"):
    config.available_features.add("mpi")
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    config.substitutions.append(
        ("%mpirun2", "mpirun --oversubscribe --bind-to none -np 2"))
else:
    lit_config.note("MPI was not found at build time: the data-parallel "
                    "tests (test/dist, REQUIRES: mpi) are skipped; "
                    "scripts/install-deps.sh installs Open MPI")

if config.cuda_found in ("TRUE", "ON", "1", "True"):
    config.available_features.add("cuda")

# A CUDA driver is installed (libcuda.so.1 loads): tests of the no-driver
# error are unsupported there.
try:
    import ctypes
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass
