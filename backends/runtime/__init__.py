"""Loading and running compiled artifacts.

- `cbuild`: compile generated C into a cached shared library and call it with ctypes
  (`build(c_source, name=...) -> Library`, `CFunction(loop_module)(*inputs, params=...)`).
"""

from dlpc.backends.runtime.cbuild import CFunction, Library, build

__all__ = ["CFunction", "Library", "build"]
