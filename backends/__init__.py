"""dlpc's code generators: numpy (reference Python), C, OpenCL C and DLP C, with `runtime/`
to build and run what they emit. `TARGETS` is the registry of xDSL targets for `dlpc-opt`."""

from xdsl.utils.target import Target

from dlpc.dialects import lazy_class

TARGETS = {
    "c": lazy_class("backends.c", "CTarget", Target),
    "dlp-c": lazy_class("backends.dlp_c", "DlpCTarget", Target),
    "opencl": lazy_class("backends.opencl", "OpenCLTarget", Target),
}
