"""What the serving-engine plugins (plugins/vllm, plugins/sglang) share:
where the checkpoint is and the loader options (options.py), GGUF tensor
names as the model's Hugging Face names and llama.cpp's q/k row
permutation undone (gguf_names.py, experts.py), a config.json from GGUF
metadata (hf_config.py), what a safetensors checkpoint holds that
weightstream dequantizes (checkpoints.py), and each rank's share of every
weight asked of the model's own `load_weights` (probe.py, sharding.py).
Both engines' models take (Hugging Face name, tensor) pairs in
`load_weights`, so all of it is engine-neutral; torch and transformers are
imported only by the modules that need them."""
