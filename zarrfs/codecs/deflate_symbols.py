"""DEFLATE (RFC 1951) as symbols: canonical Huffman tables, and a raw DEFLATE stream (as zlib
writes it) split into the bit fields of its blocks, each field as read (least significant bit
first) so that it can be written back bit for bit in another order. GDeflate
(zarrfs.codecs.gdeflate) deals these fields to its 32 sub-streams."""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import CodecError

LENGTH_BASE = (3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99,
               115, 131, 163, 195, 227, 258)
LENGTH_EXTRA = (0,) * 8 + tuple(n for n in range(1, 6) for _ in range(4)) + (0,)
DISTANCE_BASE = (1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025,
                 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577)
DISTANCE_EXTRA = (0, 0, *(n for n in range(13) for _ in range(2)), 13, 13)
PRECODE_ORDER = (16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15)
FIXED_LITLEN = (8,) * 144 + (9,) * 112 + (7,) * 24 + (8,) * 8
FIXED_DISTANCE = (5,) * 32
END_OF_BLOCK = 256

Field = tuple[int, int]  # (bits as read, how many)


class HuffmanTable:
    """A canonical Huffman code as a lookup on the next `bits` bits: (symbol, code length)."""

    def __init__(self, lengths: list[int] | tuple[int, ...]) -> None:
        self.bits = max(lengths, default=0) or 1
        self.entries: list[tuple[int, int]] = [(0, 0)] * (1 << self.bits)
        counts = [0] * 16
        for n in lengths:
            counts[n] += 1
        counts[0] = 0
        code, next_code = 0, [0] * 16
        for n in range(1, 16):
            code = (code + counts[n - 1]) << 1
            next_code[n] = code
        for symbol, n in enumerate(lengths):
            if n:
                reversed_code = int(f"{next_code[n]:0{n}b}"[::-1], 2)
                next_code[n] += 1
                self.entries[reversed_code :: 1 << n] = [(symbol, n)] * (1 << (self.bits - n))

    def lookup(self, bits: int) -> tuple[int, int]:
        symbol, n = self.entries[bits & ((1 << self.bits) - 1)]
        if n == 0:
            raise CodecError("gdeflate: a Huffman code no table has")
        return symbol, n


@dataclass
class Block:
    final: int
    kind: int  # 0 stored, 1 fixed Huffman, 2 dynamic Huffman
    stored: bytes = b""
    counts: tuple[int, int, int] = (0, 0, 0)  # HLIT, HDIST, HCLEN as stored
    precode: list[int] = field(default_factory=list)  # HCLEN + 4 lengths, in PRECODE_ORDER
    lengths: list[Field] = field(default_factory=list)  # the code length symbols, extra bits joined
    # (litlen field, distance field or None); the end of block last
    symbols: list[tuple[Field, Field | None]] = field(default_factory=list)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def peek(self) -> int:
        """The next 32 bits or more (zeros past the end)."""
        start = self.position >> 3
        return int.from_bytes(self.data[start : start + 5], "little") >> (self.position & 7)

    def take(self, n: int) -> int:
        bits = self.peek() & ((1 << n) - 1)
        self.position += n
        return bits

    def code(self, table: HuffmanTable) -> tuple[int, Field]:
        bits = self.peek()
        symbol, n = table.lookup(bits)
        self.position += n
        return symbol, (bits & ((1 << n) - 1), n)


def parse(data: bytes) -> list[Block]:
    """The blocks of a raw DEFLATE stream."""
    reader = _Reader(data)
    blocks: list[Block] = []
    while not blocks or not blocks[-1].final:
        block = Block(reader.take(1), reader.take(2))
        if block.kind == 0:
            reader.position = (reader.position + 7) // 8 * 8
            size = reader.take(16)
            reader.take(16)
            block.stored = data[reader.position // 8 : reader.position // 8 + size]
            reader.position += 8 * size
        else:
            litlen, distance = _tables(block, reader)
            _symbols(block, reader, litlen, distance)
        blocks.append(block)
    return blocks


def dynamic_tables(hlit: int, hdist: int, all_lengths: list[int]) -> tuple[HuffmanTable, HuffmanTable]:
    return (HuffmanTable(all_lengths[: hlit + 257]),
            HuffmanTable(all_lengths[hlit + 257 : hlit + 257 + hdist + 1]))


def expand_lengths(fields: list[tuple[int, int]], total: int) -> list[int]:
    """Code lengths from (precode symbol, its extra bits) pairs."""
    lengths: list[int] = []
    for symbol, extra in fields:
        if symbol < 16:
            lengths.append(symbol)
        elif symbol == 16:
            if not lengths:
                raise CodecError("gdeflate: a repeat with nothing before it")
            lengths += [lengths[-1]] * (3 + extra)
        else:
            lengths += [0] * ((3 if symbol == 17 else 11) + extra)
    if len(lengths) < total:
        raise CodecError("gdeflate: too few code lengths")
    return lengths[:total]


PRECODE_EXTRA = {16: 2, 17: 3, 18: 7}


def _tables(block: Block, reader: _Reader) -> tuple[HuffmanTable, HuffmanTable]:
    if block.kind == 1:
        return HuffmanTable(FIXED_LITLEN), HuffmanTable(FIXED_DISTANCE)
    if block.kind != 2:
        raise CodecError("gdeflate: block type 3")
    block.counts = (reader.take(5), reader.take(5), reader.take(4))
    hlit, hdist, hclen = block.counts
    block.precode = [reader.take(3) for _ in range(hclen + 4)]
    precode_lengths = [0] * 19
    for position, n in enumerate(block.precode):
        precode_lengths[PRECODE_ORDER[position]] = n
    precode = HuffmanTable(precode_lengths)
    decoded: list[tuple[int, int]] = []
    total = hlit + 257 + hdist + 1
    count = 0
    while count < total:
        symbol, (bits, n) = reader.code(precode)
        extra = reader.take(PRECODE_EXTRA.get(symbol, 0))
        decoded.append((symbol, extra))
        block.lengths.append((bits | extra << n, n + PRECODE_EXTRA.get(symbol, 0)))
        count += 1 if symbol < 16 else (3 if symbol < 18 else 11) + extra
    return dynamic_tables(hlit, hdist, expand_lengths(decoded, total))


def _symbols(block: Block, reader: _Reader, litlen: HuffmanTable, distance: HuffmanTable) -> None:
    while True:
        symbol, (bits, n) = reader.code(litlen)
        if symbol < END_OF_BLOCK or symbol == END_OF_BLOCK:
            block.symbols.append(((bits, n), None))
            if symbol == END_OF_BLOCK:
                return
            continue
        extra = LENGTH_EXTRA[symbol - 257]
        length_field = (bits | reader.take(extra) << n, n + extra)
        dsymbol, (dbits, dn) = reader.code(distance)
        dextra = DISTANCE_EXTRA[dsymbol]
        block.symbols.append((length_field, (dbits | reader.take(dextra) << dn, dn + dextra)))
