"""TEST-ONLY stand-in for `sgl_kernel` (SGLang's CUDA kernels) on a CPU
machine: SGLang 0.5.23 imports names from it (and from its submodules) at
load time even where, as on its CPU path, it calls none. Every attribute,
of this module and of any `sgl_kernel.*` submodule, is a stub that raises
NotImplementedError naming itself when called, so a test that reached a
real kernel fails loudly instead of computing something else. Never install
it beside a real sgl_kernel (scripts/setup_sglang.sh puts it only into the
test venv)."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.0.0+weightstream-test-stub"


class _Stub:
    """A kernel name: callable (raises), usable as a base class or a
    decorator target, and an attribute namespace of further stubs."""

    def __init__(self, name: str):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"{self._name}: the test-only sgl_kernel stand-in has no kernels "
                                  "(plugins/sglang/tests/sgl_kernel_stub); this path needs the real sgl_kernel")

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Stub(f"{self._name}.{attr}")

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<sgl_kernel stub {self._name}>"


def _module_getattr(module_name: str):
    def __getattr__(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Stub(f"{module_name}.{attr}")

    return __getattr__


__getattr__ = _module_getattr(__name__)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Any `sgl_kernel.x.y` imports as a stub module."""

    def find_spec(self, fullname, path, target=None):
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []
        m.__getattr__ = _module_getattr(spec.name)
        return m

    def exec_module(self, module):
        pass


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.append(_Finder())
