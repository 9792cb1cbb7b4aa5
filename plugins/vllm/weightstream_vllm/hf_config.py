"""`python -m weightstream_vllm.hf_config model.gguf -o DIR`: the command
docs/vllm.md gives, kept under the plugin's name; the code is the
weightstream package's (weightstream/serving/hf_config.py), shared with the
SGLang plugin."""
import sys

from weightstream.serving.hf_config import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m weightstream_vllm.hf_config"))
