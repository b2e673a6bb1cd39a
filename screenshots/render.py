#!/usr/bin/env python3
"""Renders a `tmux capture-pane -e` text capture (ANSI colours) to a PNG.

    python3 screenshots/render.py CAPTURE.ansi COLSxROWS OUT.png

Needs `pip install pyte Pillow` and the DejaVu Sans Mono font (Debian: fonts-dejavu-core).
The capture is replayed through pyte (a terminal emulator) so every cell's character,
colours and bold flag are exactly what tmux had on screen; each cell is then painted.
Block elements (bars) and braille patterns (the bands view, the sweep curve) are drawn as
shapes on the cell grid rather than as font glyphs: the mono font has no braille.
"""
import sys

import pyte
from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"
SIZE = 15
BG = (24, 24, 27)
FG = (220, 220, 220)
# xterm's default 16-colour palette (tmux passes the indices through).
PALETTE = {
    "black": (0, 0, 0), "red": (205, 49, 49), "green": (13, 188, 121),
    "brown": (229, 229, 16), "blue": (36, 114, 200), "magenta": (188, 63, 188),
    "cyan": (17, 168, 205), "white": (229, 229, 229),
    "brightblack": (102, 102, 102), "brightred": (241, 76, 76),
    "brightgreen": (35, 209, 139), "brightbrown": (245, 245, 67),
    "brightblue": (59, 142, 234), "brightmagenta": (214, 112, 214),
    "brightcyan": (41, 184, 219), "brightwhite": (255, 255, 255),
}


def colour(name, default):
    if name == "default":
        return default
    if name in PALETTE:
        return PALETTE[name]
    if len(name) == 6:
        try:
            return tuple(int(name[i:i + 2], 16) for i in (0, 2, 4))
        except ValueError:
            pass
    return default


# Braille dot n (bit n of the code point's offset from U+2800) at (column, row) of the 2x4 grid.
BRAILLE_DOTS = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (0, 3), (1, 3)]


def braille(draw, bits, px, py, cw, ch, fg):
    """Paints a braille pattern (U+2800..U+28FF) as dots on the cell's 2x4 grid, as terminals
    do. DejaVu Sans Mono has no braille glyphs (it would paint boxes); drawing the dots also
    keeps them on the cell grid, so the braille charts join across cells."""
    r = max(1.0, min(cw / 4, ch / 8) * 0.6)
    for bit, (col, row) in enumerate(BRAILLE_DOTS):
        if bits & (1 << bit):
            cx = px + cw * (2 * col + 1) / 4
            cy = py + ch * (2 * row + 1) / 8
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fg)


def main():
    path, size, out = sys.argv[1], sys.argv[2], sys.argv[3]
    cols, rows = (int(v) for v in size.split("x"))
    screen = pyte.Screen(cols, rows)
    stream = pyte.Stream(screen)
    with open(path, encoding="utf-8") as f:
        # No newline after the last row, or the screen scrolls and loses the first one.
        stream.feed(f.read().rstrip("\n").replace("\n", "\r\n"))
    font = ImageFont.truetype(FONT, SIZE)
    bold = ImageFont.truetype(BOLD, SIZE)
    left, top, right, bottom = font.getbbox("█")
    cw = round(font.getlength("M"))
    ch = SIZE + 4
    img = Image.new("RGB", (cols * cw + 16, rows * ch + 16), BG)
    draw = ImageDraw.Draw(img)
    for y in range(rows):
        line = screen.buffer[y]
        for x in range(cols):
            cell = line[x]
            fg = colour(cell.fg, FG)
            bg = colour(cell.bg, BG)
            if cell.reverse:
                fg, bg = (bg if cell.bg != "default" else BG), (fg if cell.fg != "default" else FG)
            px, py = 8 + x * cw, 8 + y * ch
            draw.rectangle([px, py, px + cw - 1, py + ch - 1], fill=bg)
            char = cell.data
            if char in ("", " "):
                continue
            if "\u2581" <= char <= "\u2588":
                # Block elements fill the cell from the bottom, so bars touch across rows.
                eighths = ord(char) - 0x2580
                h = round(ch * eighths / 8)
                draw.rectangle([px, py + ch - h, px + cw - 1, py + ch - 1], fill=fg)
                continue
            if "\u2800" <= char <= "\u28ff":
                braille(draw, ord(char) - 0x2800, px, py, cw, ch, fg)
                continue
            draw.text((px, py + 2), char, font=bold if cell.bold else font, fill=fg)
    img.save(out)


if __name__ == "__main__":
    main()
