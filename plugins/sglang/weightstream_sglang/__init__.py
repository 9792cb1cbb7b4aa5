"""SGLang plugin for weightstream: `--load-format weightstream`.

SGLang (0.5.23) calls `register()` in every process that loads a model
(the launcher, `sglang.Engine`, each scheduler) through the
`sglang.srt.plugins` entry point. It makes the name valid on the command
line (`add_load_format_choices`) and maps it to the loader class in
`LoadConfig._verify_load_format`, whose enum of SGLang's own formats would
refuse it; `get_model_loader` instantiates a `load_format` that is a class.
Idempotent; imports nothing heavy until a load runs.
"""
from __future__ import annotations

LOAD_FORMAT = "weightstream"
VERIFY = "sglang.srt.configs.load_config.LoadConfig._verify_load_format"
_registered = False


def _verify_load_format(original, self, *args, **kwargs):
    if isinstance(self.load_format, str) and self.load_format.lower() == LOAD_FORMAT:
        from .loader import WeightstreamModelLoader

        self.load_format = WeightstreamModelLoader
        return None
    return original(self, *args, **kwargs)


def register() -> None:
    global _registered
    if _registered:
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType
    from sglang.srt.server_args import LOAD_FORMAT_CHOICES, add_load_format_choices

    if LOAD_FORMAT not in LOAD_FORMAT_CHOICES:
        add_load_format_choices([LOAD_FORMAT])
    HookRegistry.register(VERIFY, _verify_load_format, HookType.AROUND)
    _registered = True
