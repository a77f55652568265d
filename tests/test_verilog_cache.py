"""The Verilog cache (zoforge.hw.verilog_cache): a hit is the fresh conversion's text, byte
for byte; every change of code, configuration, top or family is another key; a damaged or
partial entry is converted again; an unusable cache still gives the Verilog; a hit leaves
no Amaranth warning behind."""
from __future__ import annotations

import gc
import json
import warnings

import amaranth.back.verilog
import pytest

from zoforge.golden.rng import OnTheFlyConfig
from zoforge.hw import verilog_cache
from zoforge.hw.designs import BUILTIN
from zoforge.hw.export import design_verilog, to_verilog, verilog_key, write_design
from zoforge.hw.rng.designs import elaborate_generator
from zoforge.hw.verilog_cache import (KIND, VERILOG, cached_verilog, code_digest,
                                      source_roots, sources_digest)

SMALL = OnTheFlyConfig(n_rng=3, bits=5)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("ZOFORGE_CACHE", str(folder))
    return folder / KIND


@pytest.fixture
def conversions(monkeypatch):
    """Every Amaranth conversion of the test, by top name."""
    made, real = [], amaranth.back.verilog.convert

    def counted(*args, **kwargs):
        made.append(kwargs["name"])
        return real(*args, **kwargs)
    monkeypatch.setattr(amaranth.back.verilog, "convert", counted)
    return made


def entries(cache):
    return sorted(cache.iterdir()) if cache.exists() else []


def test_a_hit_is_the_fresh_conversion_and_converts_nothing(cache, conversions):
    design = elaborate_generator(SMALL)
    fresh = to_verilog(design.top, design.name)
    assert design_verilog(elaborate_generator(SMALL)) == fresh          # stored
    assert design_verilog(elaborate_generator(SMALL)) == fresh          # read back
    assert conversions == [design.name] * 2                              # fresh + stored
    (entry,) = entries(cache)
    assert (entry / VERILOG).read_text() == fresh
    assert json.loads((entry / "result.json").read_text())["bytes"] == len(fresh.encode())


def test_written_designs_take_it_and_stay_byte_identical(cache, conversions, tmp_path):
    first = write_design(elaborate_generator(SMALL), tmp_path / "a")["verilog"].read_text()
    second = write_design(elaborate_generator(SMALL), tmp_path / "b")["verilog"].read_text()
    assert first == second and len(conversions) == 1


def test_every_part_of_the_key_is_another_entry(cache, conversions, monkeypatch):
    design_verilog(elaborate_generator(SMALL))
    design_verilog(elaborate_generator(OnTheFlyConfig(n_rng=3, bits=6)))      # config
    design_verilog(elaborate_generator(SMALL), family="xcup")                # family
    monkeypatch.setattr(verilog_cache, "code_digest", lambda: "another version")
    design_verilog(elaborate_generator(SMALL))                               # code
    assert len(entries(cache)) == 4 and len(conversions) == 4


def test_the_code_digest_covers_every_source_file(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "a.py").write_text("x = 1\n")
    (root / "sub" / "b.py").write_text("y = 2\n")
    (root / "notes.txt").write_text("not a source")
    before = sources_digest({"hw": root})
    (root / "notes.txt").write_text("changed")
    assert sources_digest({"hw": root}) == before
    (root / "sub" / "b.py").write_text("y = 3\n")                # a nested file's byte
    changed = sources_digest({"hw": root})
    assert changed != before
    (root / "sub" / "c.py").write_text("")                       # a new, empty file
    assert sources_digest({"hw": root}) != changed
    assert sources_digest({"golden": root}) != sources_digest({"hw": root})
    # the real roots: the generators, their golden models, the boards, zoforge itself
    roots = source_roots()
    assert set(roots) == {"hw", "golden", "boards", ""}
    assert (roots["hw"] / "export.py").is_file() and (roots[""] / "config.py").is_file()
    assert code_digest() == sources_digest(roots)


@pytest.mark.parametrize("damage", ["truncated", "edited", "no-record", "bad-record",
                                    "no-text", "grown", "bad-size"])
def test_a_damaged_entry_is_converted_again(cache, conversions, damage):
    fresh = design_verilog(elaborate_generator(SMALL))
    (entry,) = entries(cache)
    text, record = entry / VERILOG, entry / "result.json"
    if damage == "truncated":
        text.write_text(fresh[:-100])
    elif damage == "edited":                  # the same size, one value changed
        text.write_text(fresh.replace("1'h0", "1'h1", 1))
    elif damage == "no-record":
        record.unlink()
    elif damage == "bad-record":
        record.write_text("[not an object")
    elif damage == "grown":                   # more than the record says: not read whole
        text.write_text(fresh + "// more\n")
    elif damage == "bad-size":
        record.write_text(json.dumps({"sha256": "0" * 64, "bytes": -1}))
    else:
        text.unlink()
    assert design_verilog(elaborate_generator(SMALL)) == fresh
    assert len(conversions) == 2
    assert text.read_text() == fresh                             # repaired
    assert design_verilog(elaborate_generator(SMALL)) == fresh and len(conversions) == 2


@pytest.mark.parametrize("value", ["relative/cache", "file"])
def test_an_unusable_cache_still_gives_the_verilog(tmp_path, monkeypatch, conversions, value):
    if value == "file":
        (tmp_path / "file").write_text("a file, not a folder")
        value = str(tmp_path / "file")
    monkeypatch.setenv("ZOFORGE_CACHE", value)
    fresh = to_verilog(elaborate_generator(SMALL).top, "rng_onthefly_n3_b5")
    assert design_verilog(elaborate_generator(SMALL)) == fresh


def test_a_hit_leaves_no_unused_elaboratable_warning(cache, tmp_path):
    """Every built-in design's top is made and, on a hit, never elaborated: Amaranth would
    warn about it (once anything was elaborated) unless its module says not to."""
    to_verilog(elaborate_generator(SMALL).top, "enables_the_warning")
    designs = [design.elaborate(design.default_config()) for design in BUILTIN]
    for design in designs:          # an entry for each (a stand-in text: nothing converted)
        cached_verilog(verilog_key(design), lambda: f"module {design.name}; endmodule\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for design in designs:
            assert design_verilog(design) == f"module {design.name}; endmodule\n"
        del designs, design
        gc.collect()
    assert [str(w.message) for w in caught] == []
