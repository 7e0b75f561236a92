"""Each answer schema as llama.cpp's own grammar parser takes it (tests/it/real.rs).

usage: python grammars.py MODEL.gguf SCHEMA.json...  (the harness's venv: llama-cpp-python)

Converts each schema with llama-cpp-python's converter (as its chat handlers do for a forced tool
call) and builds llama.cpp's grammar sampler from it; prints `NAME ok` or `NAME refused`. A refused
grammar is not an error to the server: it samples with no grammar at all, so a constrained model
is constrained no more. Exits 1 when any is refused.
"""
import json
import sys

import llama_cpp
from llama_cpp import Llama
from llama_cpp.llama_grammar import json_schema_to_gbnf

model = Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
vocab = llama_cpp.llama_model_get_vocab(model.model)
refused = 0
for path in sys.argv[2:]:
    grammar = json_schema_to_gbnf(open(path).read())
    ok = bool(llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root"))
    refused += not ok
    print(path, "ok" if ok else "refused")
sys.exit(1 if refused else 0)
