"""The synthesis estimate reads each memory's contents from a file (``memory_init_files``,
reports/synth.py): the text rule on the Verilog ``write_verilog`` writes, and, read by Yosys
both ways, every memory with the same contents."""
from __future__ import annotations

import json

import pytest
from amaranth.back import verilog
from amaranth.hdl import Cat, Elaboratable, Module, Signal
from amaranth.lib.memory import Memory

from zoforge.reports.synth import memory_init_files, run_yosys

BLOCK = ("  initial begin\n    mem[0] = 8'h0f;\n    mem[1] = 8'd200;\n"
         "    mem[2] = 8'b101;\n    mem[3] = 8'sh80;\n  end\n")


def test_a_block_of_words_becomes_a_file_of_the_same_words():
    before, after = "  reg [7:0] mem [3:0];\n", "  assign o = 1'h0;\n"
    source, files = memory_init_files(before + BLOCK + after)
    assert source == before + '  initial $readmemh("init0.hex", mem);\n' + after
    assert files == {"init0.hex": "0f\nc8\n05\n80\n"}


def test_each_block_has_its_own_file_and_an_escaped_name_keeps_its_space():
    escaped = "  initial begin\n    \\mem$12 [0] = 32'd0;\n    \\mem$12 [1] = 32'd7;\n  end\n"
    source, files = memory_init_files(BLOCK + escaped)
    assert source.splitlines()[1] == '  initial $readmemh("init1.hex", \\mem$12 );'
    assert files["init1.hex"] == "00000000\n00000007\n"
    assert len(files) == 2


@pytest.mark.parametrize("change", [
    ("mem[2] = 8'b101;", "mem[2] = 8'bx01;"),          # an undefined bit
    ("mem[2] = 8'b101;", "mem[2] = 8'hz;"),
    ("mem[2] = 8'b101;", "mem[3] = 8'b101;"),          # addresses not 0, 1, 2 ...
    ("mem[2] = 8'b101;", "other[2] = 8'b101;"),        # two memories in one block
    ("mem[2] = 8'b101;", "mem[2] = -8'sd3;"),          # not a plain number
    ("mem[2] = 8'b101;", "mem[2] <= 8'b101;"),         # not a plain assignment
])
def test_a_block_that_is_not_plain_words_stays_as_it_is(change):
    block = BLOCK.replace(*change)
    assert memory_init_files(block) == (block, {})


def test_an_initial_block_that_is_not_memory_words_stays():
    block = "  initial begin\n    x = 1'h0;\n  end\n"
    assert memory_init_files(block) == (block, {})


class _Memories(Elaboratable):
    """Three written and read memories: ``bram`` and ``small`` (no init: written as zero
    words; 1,024 and 4 words) and ``table`` (the words 1 ... 16)."""

    def __init__(self):
        self.addr = Signal(10)
        self.data = Signal(16)
        self.we = Signal()
        self.out = Signal(40)

    def elaborate(self, platform):
        m = Module()
        m.submodules.bram = bram = Memory(shape=16, depth=1024, init=[])
        m.submodules.small = small = Memory(shape=16, depth=4, init=[])
        m.submodules.table = table = Memory(shape=8, depth=16, init=range(1, 17))
        ports = []
        for memory, width in ((bram, 16), (small, 16), (table, 8)):
            write = memory.write_port()
            read = memory.read_port()
            m.d.comb += [write.addr.eq(self.addr), write.data.eq(self.data[:width]),
                         write.en.eq(self.we), read.addr.eq(self.addr)]
            ports.append(read.data)
        m.d.comb += self.out.eq(Cat(*ports))
        return m


def _verilog() -> str:
    design = _Memories()
    return verilog.convert(design, name="mems",
                           ports=[design.addr, design.data, design.we, design.out])


def test_amaranths_memories_become_files():
    source, files = memory_init_files(_verilog())
    assert "initial begin" not in source and source.count("$readmemh") == 3
    assert sorted(len(text.split()) for text in files.values()) == [4, 16, 1024]
    table = next(text for text in files.values() if len(text.split()) == 16)
    assert [int(word, 16) for word in table.split()] == list(range(1, 17))


def _contents(source: str, files: dict[str, str], run) -> dict[int, str]:
    """Each memory's size and contents as Yosys reads them (``$mem_v2``'s INIT)."""
    run.mkdir()
    (run / "d.v").write_text(source)
    for name, text in files.items():
        (run / name).write_text(text)
    run_yosys(["-q", "-p", "read_verilog -sv d.v; hierarchy -top mems; proc; "
               "memory_collect; write_json n.json"], cwd=run)
    cells = json.loads((run / "n.json").read_text())["modules"]["mems"]["cells"].values()
    return sorted((int(str(c["parameters"]["SIZE"]), 2), c["parameters"]["INIT"])
                  for c in cells if c["type"] == "$mem_v2")


def test_yosys_reads_the_same_contents_from_the_files(tmp_path):
    text = _verilog()
    inline = _contents(text, {}, tmp_path / "inline")
    assert [size for size, _ in inline] == [4, 16, 1024]
    table = int(inline[1][1][::-1][:16 * 8][::-1], 2)     # INIT: word 0 in the low bits
    assert [(table >> (8 * i)) & 0xFF for i in range(16)] == list(range(1, 17))
    assert _contents(*memory_init_files(text), tmp_path / "files") == inline
