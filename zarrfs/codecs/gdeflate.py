"""zarrs' `zarrs.gdeflate` codec: GDeflate pages (NVIDIA's and Microsoft's DEFLATE for GPUs)
in zarrs' frame: the decoded size (u64 LE), the page count (u64 LE), each page's encoded size
(u64 LE), then the pages, each of at most 64 KiB decoded.

A GDeflate page is a DEFLATE stream whose fields are dealt to 32 sub-streams ("lanes") in
turns, as libdeflate's GDeflate decoder (gdeflate_decompress_template.h) reads them: a lane
holds up to 64 bits and, when left with fewer than 32 after its turn, takes the next 32-bit
word of the page; a match's length is read in one turn of a lane, its distance in that lane's
next turn. No Python package reads GDeflate, so both directions are here, pure Python: the
decoder follows those turns; the encoder has zlib write a raw DEFLATE page, takes it apart
into its fields (zarrfs.codecs.deflate_symbols) and deals them to the lanes in the same turns.
The encoded bytes are not libdeflate's (zlib chooses other matches), but any GDeflate reader
decodes them. Pure Python: measured here (a loaded 2-core host) on float32 data that deflate
barely compresses, 0.4-1.5 MB/s decoded and 0.2 MB/s encoded; about 100 MB/s on long runs.
Fine for small arrays, slow for large ones.
"""

from __future__ import annotations

import zlib

from ..formats.description import CodecSpec
from .base import BytesBytesCodec, BytesLike, CodecError, check_config_keys, check_limit, config_int
from .deflate_symbols import (
    DISTANCE_BASE,
    DISTANCE_EXTRA,
    END_OF_BLOCK,
    FIXED_DISTANCE,
    FIXED_LITLEN,
    LENGTH_BASE,
    LENGTH_EXTRA,
    PRECODE_EXTRA,
    PRECODE_ORDER,
    Block,
    HuffmanTable,
    dynamic_tables,
    expand_lengths,
    parse,
)

PAGE = 1 << 16
LANES = 32
_WORD = 32


class GDeflateCodec(BytesBytesCodec):
    def __init__(self, level: int) -> None:
        self.level = level

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: object) -> GDeflateCodec:
        check_config_keys(spec, {"level"})
        return cls(config_int(spec, "level", None, 0, 12))

    def encode(self, data: BytesLike) -> BytesLike:
        raw = bytes(data)
        pages = [_encode_page(raw[start : start + PAGE], min(self.level, 9))
                 for start in range(0, max(len(raw), 1), PAGE)]
        header = [len(raw), len(pages), *map(len, pages)]
        return b"".join(n.to_bytes(8, "little") for n in header) + b"".join(pages)

    def decode(self, data: BytesLike, exact_size: int | None, limit: int) -> BytesLike:
        view = bytes(data)
        if len(view) < 16:
            raise CodecError("gdeflate: shorter than its header")
        size, count = int.from_bytes(view[:8], "little"), int.from_bytes(view[8:16], "little")
        check_limit(size, exact_size, limit)
        if count != max(1, -(-size // PAGE)) or len(view) < 16 + 8 * count:
            raise CodecError(f"gdeflate: {count} pages cannot hold {size} bytes, or are cut off")
        start = 16 + 8 * count
        out = bytearray()
        for page in range(count):
            end = start + int.from_bytes(view[16 + 8 * page : 24 + 8 * page], "little")
            out += _decode_page(view[start:end], min(PAGE, size - PAGE * page))
            start = end
        if start != len(view):
            raise CodecError("gdeflate: pages do not end where the data does")
        return out


class _Lanes:
    """The bit buffers of the 32 lanes, reading a page's words as the decoder does."""

    def __init__(self, page: bytes) -> None:
        self.page = page
        self.position = 0
        self.buffer = [0] * LANES
        self.left = [0] * LANES
        self.lane = 0
        for _ in range(LANES):
            self.advance()

    def ensure(self) -> None:
        lane = self.lane
        if self.left[lane] < _WORD:
            word = int.from_bytes(self.page[self.position : self.position + 4], "little")
            self.buffer[lane] |= word << self.left[lane]
            self.left[lane] += _WORD
            self.position += 4
            if self.position > len(self.page) + 4 * LANES:
                raise CodecError("gdeflate: page cut off")

    def advance(self) -> None:
        self.ensure()
        self.lane = (self.lane + 1) % LANES

    def take(self, n: int) -> int:
        lane = self.lane
        bits = self.buffer[lane] & ((1 << n) - 1)
        self.buffer[lane] >>= n
        self.left[lane] -= n
        return bits

    def code(self, table: HuffmanTable) -> int:
        symbol, n = table.lookup(self.buffer[self.lane])
        self.take(n)
        return symbol


def _decode_page(page: bytes, size: int) -> bytes:
    lanes = _Lanes(page)
    out = bytearray(size)
    written = 0
    final = 0
    while not final:
        lanes.lane = 0
        final, kind = lanes.take(1), lanes.take(2)
        lanes.ensure()
        if kind == 0:
            count = lanes.take(16)
            if written + count > size:
                raise CodecError("gdeflate: a page decodes to more than its size")
            for _ in range(count):
                out[written] = lanes.take(8)
                written += 1
                lanes.advance()
            _finish_block(lanes, out, {}, None)
            continue
        litlen, distance = _read_tables(lanes, kind)
        written = _decode_symbols(lanes, out, written, litlen, distance)
    if written != size:
        raise CodecError(f"gdeflate: a page decoded to {written} bytes, expected {size}")
    return bytes(out)


def _read_tables(lanes: _Lanes, kind: int) -> tuple[HuffmanTable, HuffmanTable]:
    if kind == 1:
        return HuffmanTable(FIXED_LITLEN), HuffmanTable(FIXED_DISTANCE)
    if kind != 2:
        raise CodecError("gdeflate: block type 3")
    hlit, hdist, hclen = lanes.take(5), lanes.take(5), lanes.take(4)
    lanes.ensure()
    precode_lengths = [0] * 19
    for position in range(hclen + 4):
        precode_lengths[PRECODE_ORDER[position]] = lanes.take(3)
        lanes.advance()
    precode = HuffmanTable(precode_lengths)
    lanes.lane = 0
    total, count, fields = hlit + 257 + hdist + 1, 0, []
    while count < total:
        symbol = lanes.code(precode)
        extra = lanes.take(PRECODE_EXTRA.get(symbol, 0))
        fields.append((symbol, extra))
        count += 1 if symbol < 16 else (3 if symbol < 18 else 11) + extra
        lanes.advance()
    return dynamic_tables(hlit, hdist, expand_lengths(fields, total))


def _decode_symbols(lanes: _Lanes, out: bytearray, written: int, litlen: HuffmanTable,
                    distance: HuffmanTable) -> int:
    pending: dict[int, tuple[int, int]] = {}  # lane -> (length, where) of a match to copy
    lanes.lane = 0
    # Literals are most of the work: their turn is inlined (lookup, take, advance).
    buffer, left, entries, mask = lanes.buffer, lanes.left, litlen.entries, (1 << litlen.bits) - 1
    size = len(out)
    while True:
        lane = lanes.lane
        if lane in pending:
            _copy(lanes, out, pending.pop(lane), distance)
        else:
            symbol, n = entries[buffer[lane] & mask]
            if n == 0:
                raise CodecError("gdeflate: a Huffman code no table has")
            buffer[lane] >>= n
            left[lane] -= n
            if symbol < END_OF_BLOCK:
                if written == size:
                    raise CodecError("gdeflate: a page decodes to more than its size")
                out[written] = symbol
                written += 1
            elif symbol == END_OF_BLOCK:
                _finish_block(lanes, out, pending, distance)
                return written
            else:
                length = LENGTH_BASE[symbol - 257] + lanes.take(LENGTH_EXTRA[symbol - 257])
                if written + length > size:
                    raise CodecError("gdeflate: a page decodes to more than its size")
                pending[lane] = (length, written)
                written += length
        if left[lane] < _WORD:
            lanes.ensure()
        lanes.lane = (lane + 1) % LANES


def _copy(lanes: _Lanes, out: bytearray, match: tuple[int, int], distance: HuffmanTable | None) -> None:
    if distance is None:
        raise CodecError("gdeflate: a match in a stored block")
    length, where = match
    symbol = lanes.code(distance)
    if symbol >= len(DISTANCE_BASE):
        raise CodecError("gdeflate: distance symbol out of range")
    back = DISTANCE_BASE[symbol] + lanes.take(DISTANCE_EXTRA[symbol])
    if back > where:
        raise CodecError("gdeflate: a match before the start of the page")
    source = out[where - back : where - back + min(back, length)]
    out[where : where + length] = (source * (length // len(source) + 1))[:length]


def _finish_block(lanes: _Lanes, out: bytearray, pending: dict[int, tuple[int, int]],
                  distance: HuffmanTable | None) -> None:
    """Every lane's last turn of a block: the matches still to copy."""
    for _ in range(LANES):
        if lanes.lane in pending:
            _copy(lanes, out, pending.pop(lanes.lane), distance)
        lanes.advance()


class _Dealer:
    """The encoder's mirror of `_Lanes`: the bits each lane must hold, and which lane takes
    each 32-bit word of the page, in the order the decoder will ask for them."""

    def __init__(self) -> None:
        self.pending = [0] * LANES  # bits not yet in a whole word, and how many
        self.count = [0] * LANES
        self.lane_words: list[list[int]] = [[] for _ in range(LANES)]
        self.left = [0] * LANES
        self.words: list[int] = []  # the lane of each word of the page
        self.lane = 0
        for _ in range(LANES):
            self.advance()

    def put(self, value: int, n: int) -> None:
        lane = self.lane
        self.pending[lane] |= value << self.count[lane]
        self.count[lane] += n
        self.left[lane] -= n
        if self.count[lane] >= _WORD:
            self.lane_words[lane].append(self.pending[lane] & 0xFFFFFFFF)
            self.pending[lane] >>= _WORD
            self.count[lane] -= _WORD

    def ensure(self) -> None:
        if self.left[self.lane] < _WORD:
            self.words.append(self.lane)
            self.left[self.lane] += _WORD

    def advance(self) -> None:
        self.ensure()
        self.lane = (self.lane + 1) % LANES

    def finish_block(self, pending: dict[int, tuple[int, int]]) -> None:
        for _ in range(LANES):
            if self.lane in pending:
                self.put(*pending.pop(self.lane))
            self.advance()

    def page(self) -> bytes:
        for lane in range(LANES):
            self.lane_words[lane].append(self.pending[lane])  # the last bits, zero-padded
        taken = [0] * LANES
        out = bytearray()
        for lane in self.words:
            words = self.lane_words[lane]
            out += (words[taken[lane]] if taken[lane] < len(words) else 0).to_bytes(4, "little")
            taken[lane] += 1
        return bytes(out)


def _encode_page(data: bytes, level: int) -> bytes:
    deflater = zlib.compressobj(level, zlib.DEFLATED, -15)
    dealer = _Dealer()
    for block in parse(deflater.compress(data) + deflater.flush()):
        dealer.lane = 0
        dealer.put(block.final, 1)
        dealer.put(block.kind, 2)
        dealer.ensure()
        if block.kind == 0:
            dealer.put(len(block.stored), 16)
            for byte in block.stored:
                dealer.put(byte, 8)
                dealer.advance()
            dealer.finish_block({})
        else:
            _deal_huffman_block(dealer, block)
    return dealer.page()


def _deal_huffman_block(dealer: _Dealer, block: Block) -> None:
    if block.kind == 2:
        for value, n in zip(block.counts, (5, 5, 4), strict=True):
            dealer.put(value, n)
        dealer.ensure()
        for length in block.precode:
            dealer.put(length, 3)
            dealer.advance()
        dealer.lane = 0
        for field in block.lengths:
            dealer.put(*field)
            dealer.advance()
    dealer.lane = 0
    pending: dict[int, tuple[int, int]] = {}
    last = len(block.symbols) - 1  # the end of block
    position = 0
    while True:
        if dealer.lane in pending:
            dealer.put(*pending.pop(dealer.lane))
        else:
            litlen, distance = block.symbols[position]
            dealer.put(*litlen)
            if position == last:
                dealer.finish_block(pending)
                return
            if distance is not None:
                pending[dealer.lane] = distance
            position += 1
        dealer.advance()
