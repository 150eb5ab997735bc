"""dlpc's code generators: numpy (reference Python), C, OpenCL C and DLP C, with `runtime/`
to build and run what they emit. `TARGETS` is the registry of xDSL targets for `dlpc-opt`."""

from dlpc.dialects import lazy_factory

TARGETS = {
    "c": lazy_factory("backends.c", "CTarget"),
    "dlp-c": lazy_factory("backends.dlp_c", "DlpCTarget"),
    "opencl": lazy_factory("backends.opencl", "OpenCLTarget"),
}
