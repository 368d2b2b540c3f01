#!/usr/bin/env python3
"""Read (and write) txl checkpoints from Python with nothing but the standard library
(and PyYAML for the config of current checkpoints).

A txl checkpoint is a safetensors file, gzip'd (``*.safetensors.gz``) or plain
(``*.safetensors``): an 8-byte little-endian header length N, N bytes of JSON
``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}``,
then the raw little-endian tensor bytes (offsets relative to the end of the header).
txl's metadata holds the resolved config under ``config`` as YAML (the text of the run's
config.yaml; txl before the YAML metadata wrote JSON there), and ``step``, ``tokens``,
``best_valid_loss``, ... as strings. ``config()`` reads both; the YAML needs PyYAML
(Debian: python3-yaml).

    >>> import st_reader
    >>> tensors, meta = st_reader.load("runs/tiny/best.safetensors.gz")
    >>> dtype, shape, raw = tensors["word_emb.weight"]        # "F32", [256, 128], bytes
    >>> cfg = st_reader.config(meta)                           # dict of the txl config
    >>> arrays = st_reader.to_numpy(tensors)                   # needs numpy
    >>> state_dict = st_reader.to_torch(tensors)               # needs torch

Command line: ``python3 tools/st_reader.py CKPT [--json] [--meta KEY] [--config]`` lists
the tensors (name, dtype, shape) and the metadata; ``--meta KEY`` prints one metadata value
as stored, ``--config`` the config as one JSON object.
"""
import gzip
import json
import re
import struct
import sys

# safetensors dtype -> (struct format char, bytes per element, numpy dtype name)
DTYPES = {
    "F64": ("d", 8, "float64"), "F32": ("f", 4, "float32"), "F16": ("e", 2, "float16"),
    "BF16": (None, 2, None), "I64": ("q", 8, "int64"), "I32": ("i", 4, "int32"),
    "I16": ("h", 2, "int16"), "I8": ("b", 1, "int8"), "U8": ("B", 1, "uint8"),
    "BOOL": ("?", 1, "bool"),
}


class FormatError(ValueError):
    """The file is not a well-formed safetensors file."""


def _read_bytes(path):
    with open(path, "rb") as f:
        head = f.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open  # gzip magic, whatever the name
    with opener(path, "rb") as f:
        return f.read()


def loads(buf, name="<bytes>"):
    """Parses safetensors bytes -> (tensors, metadata).

    tensors: {name: (dtype, shape, raw bytes)} in file order; metadata: {str: str}."""
    if len(buf) < 8:
        raise FormatError(f"{name}: {len(buf)} bytes, too short for a safetensors header")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > len(buf) - 8:
        raise FormatError(f"{name}: header length {n} runs past the end of the file "
                          f"({len(buf)} bytes)")
    try:
        header = json.loads(buf[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{name}: the header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise FormatError(f"{name}: the header is not a JSON object")
    meta = header.pop("__metadata__", {}) or {}
    data = memoryview(buf)[8 + n:]
    tensors = {}
    for key, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise FormatError(f"{name}: tensor '{key}': expected dtype, shape and "
                              f"data_offsets") from None
        if dtype not in DTYPES:
            raise FormatError(f"{name}: tensor '{key}': unknown dtype {dtype}")
        count = 1
        for s in shape:
            count *= s
        if not 0 <= begin <= end <= len(data) or end - begin != count * DTYPES[dtype][1]:
            raise FormatError(f"{name}: tensor '{key}': data_offsets [{begin}, {end}] do not "
                              f"fit shape {shape} {dtype} in {len(data)} data bytes")
        tensors[key] = (dtype, list(shape), bytes(data[begin:end]))
    return tensors, meta


def load(path):
    """Reads a checkpoint (gzip'd or plain) -> (tensors, metadata); see loads()."""
    return loads(_read_bytes(path), path)


def config(meta):
    """The txl config stored in a checkpoint's metadata, as a dict (or None)."""
    return config_text(meta["config"]) if "config" in meta else None


def config_text(text):
    """A txl config text (YAML as txl writes it, or the JSON of older checkpoints) -> dict
    {"model": {...}, "data": {...}, "train": {...}}."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import yaml
    except ImportError:
        raise ImportError("reading a txl config (YAML) needs PyYAML: apt-get install "
                          "python3-yaml (or pip install pyyaml)") from None
    return yaml.load(text, Loader=_yaml_loader(yaml))


_LOADER = None


def _yaml_loader(yaml):
    """PyYAML's SafeLoader, plus floats without a dot such as 1e-08 (PyYAML follows YAML
    1.1, whose float pattern needs a dot; txl writes the shortest form that reads back,
    and libyaml's scalars are untyped text to txl)."""
    global _LOADER
    if _LOADER is None:
        class Loader(yaml.SafeLoader):
            pass
        Loader.add_implicit_resolver(
            "tag:yaml.org,2002:float",
            re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
            list("-+0123456789."))
        _LOADER = Loader
    return _LOADER


def to_list(tensor):
    """One tensor as a flat list of Python numbers (stdlib only; slow for big tensors)."""
    dtype, shape, raw = tensor
    fmt, size, _ = DTYPES[dtype]
    if fmt is None:  # BF16: the high half of an F32
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    return list(struct.unpack(f"<{len(raw) // size}{fmt}", raw))


def to_numpy(tensors):
    """{name: numpy array} (needs numpy); arrays are copies, writable."""
    import numpy as np
    out = {}
    for key, (dtype, shape, raw) in tensors.items():
        if dtype == "BF16":
            u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            out[key] = u.view(np.float32).reshape(shape)
        else:
            dt = np.dtype(DTYPES[dtype][2]).newbyteorder("<")
            out[key] = np.frombuffer(raw, dtype=dt).reshape(shape).copy()
    return out


def to_torch(tensors):
    """{name: torch tensor} (needs torch and numpy): a state_dict."""
    import torch
    return {k: torch.from_numpy(v) for k, v in to_numpy(tensors).items()}


def dumps(tensors, metadata=None):
    """{name: (dtype, shape, raw bytes)} (+ {str: str} metadata) -> safetensors bytes.
    The header is padded with spaces to a multiple of 8, as the format recommends."""
    header, offset, chunks = {}, 0, []
    for key, (dtype, shape, raw) in tensors.items():
        count = 1
        for s in shape:
            count *= s
        if len(raw) != count * DTYPES[dtype][1]:
            raise ValueError(f"tensor '{key}': {len(raw)} bytes for shape {shape} {dtype}")
        header[key] = {"dtype": dtype, "shape": list(shape),
                       "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        chunks.append(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(chunks)


def save(path, tensors, metadata=None):
    """Writes plain safetensors, or gzip'd when path ends in .gz."""
    buf = dumps(tensors, metadata)
    with (gzip.open(path, "wb", 6) if path.endswith(".gz") else open(path, "wb")) as f:
        f.write(buf)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="List the tensors and metadata of a txl "
                                 "checkpoint (gzip'd or plain safetensors).")
    ap.add_argument("checkpoint")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--meta", metavar="KEY", help="print one metadata value as stored "
                    "(e.g. step)")
    ap.add_argument("--config", action="store_true",
                    help="print the config (metadata 'config') as one JSON object")
    a = ap.parse_args(argv)
    try:
        tensors, meta = load(a.checkpoint)
    except (OSError, EOFError, FormatError) as e:
        print(f"st_reader: {e}", file=sys.stderr)
        return 2
    if a.meta:
        if a.meta not in meta:
            print(f"st_reader: {a.checkpoint}: no metadata key '{a.meta}' "
                  f"(have: {', '.join(meta) or 'none'})", file=sys.stderr)
            return 2
        print(meta[a.meta])
        return 0
    if a.config:
        if "config" not in meta:
            print(f"st_reader: {a.checkpoint}: no metadata key 'config'", file=sys.stderr)
            return 2
        print(json.dumps(config(meta)))
        return 0
    if a.json:
        print(json.dumps({"tensors": {k: {"dtype": d, "shape": s} for k, (d, s, _) in
                                      tensors.items()}, "metadata": meta}))
        return 0
    width = max([len(k) for k in tensors] + [4])
    total = 0
    for k, (d, s, raw) in tensors.items():
        print(f"{k:<{width}}  {d:<4}  {s}")
        total += len(raw) // DTYPES[d][1]
    print(f"# {len(tensors)} tensors, {total} values")
    for k, v in meta.items():
        if k == "config":
            v = json.dumps(config_text(v), separators=(",", ":"))
        print(f"# {k}: {v}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # the reader went away (| head): not an error
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
