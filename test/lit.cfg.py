# -*- Python -*-
# lit configuration for mtc: FileCheck tests over mtc, mtc-opt and the examples.
import os
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "mtc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
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
