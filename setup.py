"""Builds the qemb Python package with CMake for `pip install .` (see
pyproject.toml). The extension qemb._qemb is built by the project's own
CMakeLists (target _qemb) in a build folder of its own, or in QEMB_BUILD_DIR
when set (an existing build: only what changed is rebuilt)."""
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    return re.search(r"project\(qemb VERSION ([0-9.]+)", text).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("QEMB_BUILD_DIR") or os.path.join(ROOT, "build-pip")
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DQEMB_BUILD_TESTS=OFF", "-DQEMB_BUILD_BENCH=OFF", "-DQEMB_BUILD_PYTHON=ON",
                                   "-DPython_EXECUTABLE=" + sys.executable])
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 2)
        subprocess.check_call(["cmake", "--build", build, "--target", "_qemb", "-j", jobs])
        built = os.path.join(build, "python", "qemb")
        module = next(f for f in os.listdir(built) if f.startswith("_qemb.") and f.endswith(".so"))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(built, module), target)


setup(
    version=project_version(),
    packages=["qemb"],
    package_dir={"": "python"},
    package_data={"qemb": ["__init__.pyi", "py.typed"]},
    ext_modules=[Extension("qemb._qemb", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own scratch files under the ignored build-pip/, not in the tree.
    options={"build": {"build_base": os.path.join("build-pip", "setuptools")},
             "egg_info": {"egg_base": "build-pip"}},
)
