"""pip install ./python (from the repository root, after make build-all): copies the built
libeager.so (and libeager_cuda.so where built) from $EAGER_BUILD (default: the repository's
build/) into the package, so that the installed eager_sgd finds it next to itself. The library
links the MPI of that build: install on machines with the same MPI."""
import os
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class with_library(build_py):
    def run(self):
        super().run()
        build = os.environ.get("EAGER_BUILD", os.path.join(HERE, "..", "build"))
        found = 0
        for name in ("libeager.so", "libeager_cuda.so"):
            src = os.path.join(build, name)
            if os.path.exists(src):
                shutil.copy2(src, os.path.join(self.build_lib, "eager_sgd", name))
                found += 1
        if not found:
            sys.exit("eager_sgd: %s has no libeager.so: run 'make build-all' in the repository first "
                     "(or set EAGER_BUILD to the build folder)" % os.path.abspath(build))


setup(cmdclass={"build_py": with_library})
