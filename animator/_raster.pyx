# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled steps of :mod:`animator.rasterize`: the frame kernel, one frame drawn in C without
the GIL, and :func:`fill_outside`, the first step of smoothing the sprite's texture.

A frame is made in three steps, all in single-precision floats (``float``, as numpy's float32):

1. per mesh triangle, the affine map of its rest triangle onto its deformed one, and the splat
   half-offset ``h`` in [1/4, 1/2] px that grows with the triangle's stretch;
2. per sample point, its canvas position (clipped to [0.5, size - 1.5] px), then its palette index
   written at each splat offset: pixel (floor(y + h fy), floor(x + h fx)), (fx, fy) = 4 x the offset
   in px, body parts back to front, later writes winning;
3. the closing of 1-pixel slits (a background pixel between two drawn ones).

Every float operation is written in the order :func:`animator.rasterize.rasterize` defines it (no
fused multiply-add: the build passes ``-ffp-contract=off``), so frames are the same pixel for pixel
on every machine that rounds IEEE single precision, whichever compiler built the module.

Coordinates: canvas pixels, x right, y down. Canvas arrays are (height, width) row-major uint8
palette indices. No input can make the kernel read or write outside its arrays: indices are checked
when a kernel is made, positions are clipped (NaN included) and offsets are at most 1/2 px.
"""
from libc.math cimport sqrtf
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

import numpy as np


cdef enum:
    MAX_OFFSETS = 16  # most splat offsets a kernel takes
    MAX_SIDE = 1 << 14  # largest canvas side in pixels


cdef class FrameKernel:
    """A sprite's sample points and draw order, ready to draw frames with :meth:`draw`.

    Args:
        local: (2, N) float32 rest position of each point from its triangle's first rest vertex,
            texture pixels.
        colour: (N,) uint8 palette index of each point, in draw-rank order.
        run_tri, run_len: (R,) points come in runs of one triangle: its index, the run's length.
        tri_verts: (T, 3) vertex indices of each mesh triangle.
        tri_inv: (T, 2, 2) inverse of each rest triangle's edge matrix [v1 - v0, v2 - v0].
        texel_scale: texels per texture pixel (> 0).
        spans: (S, 2) (start, stop) point ranges, the joints of every body part, parts in order.
        part_spans: (P + 1,) part p's spans are ``spans[part_spans[p]:part_spans[p + 1]]``.
        splat: (K, 2) offsets (dx, dy) in px at which each point is written, |offset| <= 1/2,
            for the unstretched half-offset h = 1/4 px; they grow with h.
        n_vertices: number of mesh vertices a frame's ``verts`` must hold.

    A kernel holds no per-frame state: several threads may :meth:`draw` with it at once.
    """

    cdef const float[:, ::1] local
    cdef const unsigned char[::1] colour
    cdef const int[::1] run_tri
    cdef const int[::1] run_end
    cdef const int[:, ::1] tri_verts
    cdef const float[:, ::1] tri_inv
    cdef float texel_scale
    cdef const int[:, ::1] spans
    cdef const int[::1] part_spans
    cdef const int[::1] span_run
    cdef int longest_span, n_offsets, n_columns, n_rows
    # the splat's distinct factors of h along x (columns) and y (rows), and each offset's pair
    cdef float fx[MAX_OFFSETS]
    cdef float fy[MAX_OFFSETS]
    cdef int column_of[MAX_OFFSETS]
    cdef int row_of[MAX_OFFSETS]
    cdef readonly int n_points, n_parts, n_vertices

    def __init__(self, local, colour, run_tri, run_len, tri_verts, tri_inv, texel_scale, spans, part_spans,
                 splat, n_vertices):
        local = np.ascontiguousarray(local, np.float32)
        colour = np.ascontiguousarray(colour, np.uint8)
        run_tri = np.ascontiguousarray(run_tri, np.int32)
        run_len = np.ascontiguousarray(run_len, np.int64)
        tri_verts = np.ascontiguousarray(tri_verts, np.int32)
        tri_inv = np.ascontiguousarray(np.asarray(tri_inv, np.float32).reshape(-1, 4))
        spans = np.ascontiguousarray(np.asarray(spans, np.int32).reshape(-1, 2))
        part_spans = np.ascontiguousarray(part_spans, np.int32)
        splat = np.asarray(splat, np.float64).reshape(-1, 2)
        n = colour.shape[0]
        # every index the C loops follow is checked here, once: they read nothing outside the arrays
        if local.ndim != 2 or local.shape[0] != 2 or local.shape[1] != n:
            raise ValueError(f"local must be (2, {n}), got {local.shape}")
        if run_tri.shape != run_len.shape or (run_len < 0).any() or int(run_len.sum()) != n:
            raise ValueError("the runs must cover the points exactly")
        if tri_verts.ndim != 2 or tri_verts.shape[1] != 3 or tri_inv.shape[0] != tri_verts.shape[0]:
            raise ValueError("tri_verts must be (T, 3) and tri_inv (T, 2, 2)")
        if len(run_tri) and (run_tri.min() < 0 or run_tri.max() >= tri_verts.shape[0]):
            raise ValueError("a run names a triangle the mesh lacks")
        if tri_verts.size and (tri_verts.min() < 0 or tri_verts.max() >= n_vertices):
            raise ValueError("a triangle names a vertex the mesh lacks")
        if len(spans) and (spans.min() < 0 or spans.max() > n or (spans[:, 0] > spans[:, 1]).any()):
            raise ValueError("a span lies outside the points")
        if (part_spans.ndim != 1 or len(part_spans) < 1 or part_spans[0] != 0
                or part_spans[len(part_spans) - 1] != len(spans) or (np.diff(part_spans) < 0).any()):
            raise ValueError("part_spans must rise from 0 to the number of spans")
        if not 1 <= len(splat) <= MAX_OFFSETS or not (np.abs(splat) <= 0.5).all():
            raise ValueError(f"1 to {MAX_OFFSETS} splat offsets of at most 1/2 px, got {splat.tolist()}")
        if not (np.isfinite(texel_scale) and texel_scale > 0):
            raise ValueError(f"texel_scale must be positive, got {texel_scale}")
        run_end = np.cumsum(run_len).astype(np.int32)
        self.local, self.colour, self.run_tri, self.run_end = local, colour, run_tri, run_end
        self.tri_verts, self.tri_inv, self.texel_scale = tri_verts, tri_inv, float(texel_scale)
        self.spans, self.part_spans = spans, part_spans
        # the run holding each span's first point, and the longest span (the size of the scratch)
        self.span_run = np.searchsorted(run_end, spans[:, 0], side="right").astype(np.int32)
        self.longest_span = int((spans[:, 1] - spans[:, 0]).max()) if len(spans) else 0
        self.n_offsets = len(splat)
        # the factors of h (4 x the offset, rounded to float as numpy does), each distinct one once:
        # a point's pixel column (row) is the same for every offset with the same x (y) factor
        factors = (4 * splat).astype(np.float32)
        columns, column_of = np.unique(factors[:, 0], return_inverse=True)
        rows, row_of = np.unique(factors[:, 1], return_inverse=True)
        self.n_columns, self.n_rows = len(columns), len(rows)
        for k in range(len(columns)):
            self.fx[k] = columns[k]
        for k in range(len(rows)):
            self.fy[k] = rows[k]
        for k in range(len(splat)):
            self.column_of[k], self.row_of[k] = column_of[k], row_of[k]
        self.n_points, self.n_parts, self.n_vertices = n, len(part_spans) - 1, int(n_vertices)

    def draw(self, unsigned char[:, ::1] out, const float[:, ::1] verts, const int[::1] part_order,
             const unsigned char[::1] part_reversed, int background, int slit_passes=8):
        """Draw one frame into ``out`` ((height, width) uint8, overwritten whole).

        Args:
            verts: (V, 2) float32 deformed mesh vertices, canvas pixels.
            part_order: (P,) body parts back to front.
            part_reversed: (P,) by part: 1 draws that part's joints in reverse order.
            background: palette index of the pixels nothing is drawn on.
            slit_passes: passes of slit closing (see :data:`animator.rasterize.SLIT_PASSES`).
        """
        cdef int height = out.shape[0], width = out.shape[1], p, rc
        if verts.shape[0] != self.n_vertices or verts.shape[1] != 2:
            raise ValueError(f"verts must be ({self.n_vertices}, 2), got ({verts.shape[0]}, {verts.shape[1]})")
        if part_order.shape[0] != self.n_parts or part_reversed.shape[0] != self.n_parts:
            raise ValueError(f"part_order and part_reversed must hold {self.n_parts} parts")
        for p in range(self.n_parts):
            if not 0 <= part_order[p] < self.n_parts:
                raise ValueError(f"part_order names part {part_order[p]} of {self.n_parts}")
        if not (1 <= height <= MAX_SIDE and 1 <= width <= MAX_SIDE and 0 <= background <= 255):
            raise ValueError(f"canvas sides must be 1..{MAX_SIDE} px and the background index 0..255")
        with nogil:
            rc = self._draw(&out[0, 0], height, width, verts, part_order, part_reversed,
                            <unsigned char>background, slit_passes)
        if rc != 0:
            raise MemoryError("no memory for a frame's scratch buffers")

    cdef int _draw(self, unsigned char* out, int height, int width, const float[:, ::1] verts,
                   const int[::1] part_order, const unsigned char[::1] part_reversed, unsigned char background,
                   int slit_passes) noexcept nogil:
        cdef int T = self.tri_verts.shape[0], L = self.longest_span if self.longest_span > 0 else 1
        cdef int j, p, s, s0, s1, rc = -1
        cdef float box[4]
        cdef float* coef = <float*>malloc(7 * (T if T > 0 else 1) * sizeof(float))
        cdef float* pos = <float*>malloc(3 * L * sizeof(float))
        cdef int* pixels = <int*>malloc((self.n_offsets + self.n_columns + self.n_rows) * L * sizeof(int))
        if coef != NULL and pos != NULL and pixels != NULL:
            self._affine_maps(verts, coef)
            _vertex_box(verts, box)
            memset(out, background, <size_t>height * width)
            for j in range(self.n_parts):
                p = part_order[j]
                s0, s1 = self.part_spans[p], self.part_spans[p + 1]
                for s in range(s1 - s0):
                    self._draw_span(out, s1 - 1 - s if part_reversed[p] else s0 + s, coef, pos, pixels, height,
                                    width)
            # points lie in their triangles, so in the vertices' box (give or take rounding), and write
            # pixels at most 1 px from where they lie (h |f| <= 1): 2 px around the box holds them
            rc = _close_slits(out, height, width, background, slit_passes, <int>(box[0] - 2), <int>(box[1] - 2),
                              <int>(box[2] + 2) + 1, <int>(box[3] + 2) + 1)
        free(coef)
        free(pos)
        free(pixels)
        return rc

    cdef void _affine_maps(self, const float[:, ::1] verts, float* coef) noexcept nogil:
        """Per triangle t, coef[7t:7t+7] = a, b, c, d, e, g, h: canvas x = a qx + b qy + c, y = d qx
        + e qy + g for a point at (qx, qy) texture px from the triangle's first rest vertex, and h
        the splat half-offset in px: 1/4 (3s - 2) for a stretch s (largest singular value of the
        map, in canvas px per texel), clamped to [1/4, 1/2] (NaN: 1/4)."""
        cdef int t, v0, v1, v2
        cdef float x0, y0, ex1, ey1, ex2, ey2, m00, m01, m10, m11, fro, det, d, s
        # float constants as variables: Cython writes a number literal as a double, which would
        # carry the arithmetic around it out in double precision
        cdef float one = 1, two = 2, three = 3, four = 4
        for t in range(self.tri_verts.shape[0]):
            v0, v1, v2 = self.tri_verts[t, 0], self.tri_verts[t, 1], self.tri_verts[t, 2]
            x0 = verts[v0, 0]
            y0 = verts[v0, 1]
            ex1 = verts[v1, 0] - x0
            ey1 = verts[v1, 1] - y0
            ex2 = verts[v2, 0] - x0
            ey2 = verts[v2, 1] - y0
            m00 = ex1 * self.tri_inv[t, 0] + ex2 * self.tri_inv[t, 2]
            m01 = ex1 * self.tri_inv[t, 1] + ex2 * self.tri_inv[t, 3]
            m10 = ey1 * self.tri_inv[t, 0] + ey2 * self.tri_inv[t, 2]
            m11 = ey1 * self.tri_inv[t, 1] + ey2 * self.tri_inv[t, 3]
            fro = m00 * m00 + m01 * m01 + m10 * m10 + m11 * m11
            det = m00 * m11 - m01 * m10
            d = fro * fro - four * det * det
            if not d > 0:
                d = 0
            d = (fro + sqrtf(d)) / two
            if not d > 0:
                d = 0
            s = sqrtf(d) / self.texel_scale
            if not s > one:
                s = one
            s = three * s - two
            if s > two:
                s = two
            coef[7 * t + 0] = m00
            coef[7 * t + 1] = m01
            coef[7 * t + 2] = x0
            coef[7 * t + 3] = m10
            coef[7 * t + 4] = m11
            coef[7 * t + 5] = y0
            coef[7 * t + 6] = s / four

    cdef void _draw_span(self, unsigned char* out, int span, const float* coef, float* pos, int* pixels,
                         int height, int width) noexcept nogil:
        """Write the points of one span (a joint of a body part) into ``out``, offset by offset,
        points in order.

        Three loops, the first two free of branches (the compiler vectorises them): each point's
        canvas position, clipped to [0.5, size - 1.5] px, and half-offset into ``pos`` (x, y, h
        rows of the span's length); its flat pixel index at every offset into ``pixels`` (K rows;
        on the canvas, as positions are clipped and h |f| <= 1), from its pixel column at each
        distinct x factor and its row start at each distinct y factor (rows after the K); the
        writes."""
        cdef int a = self.spans[span, 0], n = self.spans[span, 1] - a, K = self.n_offsets
        cdef int r = self.span_run[span], i = 0, stop, k
        cdef const float* c
        cdef const float* qx = &self.local[0, a] if n > 0 else NULL
        cdef const float* qy = &self.local[1, a] if n > 0 else NULL
        cdef const unsigned char* colour = &self.colour[a] if n > 0 else NULL
        cdef float* xs = pos
        cdef float* ys = pos + n
        cdef float* hs = pos + 2 * n
        cdef int* px
        cdef int* column
        cdef int* row
        cdef float x, y, h, f, ma, mb, mc, md, me, mg
        cdef float xhi = width - 1.5, yhi = height - 1.5, lo = 0.5
        while i < n:
            c = coef + 7 * self.run_tri[r]
            ma, mb, mc, md, me, mg, h = c[0], c[1], c[2], c[3], c[4], c[5], c[6]
            stop = self.run_end[r] - a
            if stop > n:
                stop = n
            for i in range(i, stop):
                x = ma * qx[i] + mb * qy[i] + mc
                y = md * qx[i] + me * qy[i] + mg
                x = x if x > lo else lo  # NaN -> lo
                y = y if y > lo else lo
                xs[i] = x if x < xhi else xhi
                ys[i] = y if y < yhi else yhi
                hs[i] = h
            i = stop
            r += 1
        for k in range(self.n_columns):
            column = pixels + (K + k) * n
            f = self.fx[k]
            for i in range(n):
                column[i] = <int>(xs[i] + hs[i] * f)
        for k in range(self.n_rows):
            row = pixels + (K + self.n_columns + k) * n
            f = self.fy[k]
            for i in range(n):
                row[i] = <int>(ys[i] + hs[i] * f) * width
        for k in range(K):
            px = pixels + k * n
            column = pixels + (K + self.column_of[k]) * n
            row = pixels + (K + self.n_columns + self.row_of[k]) * n
            for i in range(n):
                px[i] = row[i] + column[i]
        for k in range(K):
            px = pixels + k * n
            for i in range(n):
                out[px[i]] = colour[i]


cdef void _vertex_box(const float[:, ::1] verts, float* box) noexcept nogil:
    """box[:4] = (least x, least y, greatest x, greatest y) of the vertices, clamped to +-2^30 px
    (NaN: the clamp's bound), so that converting it to int is defined."""
    cdef Py_ssize_t v
    cdef float x, y, big = 1 << 30
    box[0] = box[1] = big
    box[2] = box[3] = -big
    for v in range(verts.shape[0]):
        x, y = verts[v, 0], verts[v, 1]
        box[0] = x if x < box[0] else box[0]
        box[1] = y if y < box[1] else box[1]
        box[2] = x if x > box[2] else box[2]
        box[3] = y if y > box[3] else box[3]
    for v in range(4):
        box[v] = box[v] if box[v] > -big else -big
        box[v] = box[v] if box[v] < big else big


cdef struct Holes:
    # slits found by a pass: flat pixel index and the colour it takes
    int* at
    unsigned char* colour
    int n, cap


cdef int _push(Holes* holes, int q, unsigned char colour) noexcept nogil:
    cdef int cap
    cdef int* at
    cdef unsigned char* col
    if holes.n == holes.cap:
        cap = 2 * holes.cap if holes.cap else 1024
        at = <int*>realloc(holes.at, cap * sizeof(int))
        if at == NULL:
            return -1
        holes.at = at
        col = <unsigned char*>realloc(holes.colour, cap)
        if col == NULL:
            return -1
        holes.colour = col
        holes.cap = cap
    holes.at[holes.n] = q
    holes.colour[holes.n] = colour
    holes.n += 1
    return 0


cdef inline int _slit_colour(const unsigned char* o, int q, int width, unsigned char bg) noexcept nogil:
    """The colour a pixel q (off the edge) takes if it is a slit: that of the pixel above when the
    pixels above and below are drawn, else of the pixel left when left and right are; -1 if q is
    drawn or no slit."""
    if o[q] != bg:
        return -1
    if o[q - width] != bg and o[q + width] != bg:
        return o[q - width]
    if o[q - 1] != bg and o[q + 1] != bg:
        return o[q - 1]
    return -1


cdef int _close_slits(unsigned char* o, int height, int width, unsigned char bg, int passes,
                      int left, int top, int right, int bottom) noexcept nogil:
    """Fill 1-pixel slits in place, off the canvas's edge, in up to ``passes`` passes; each pass
    judges every pixel as the canvas was before it. The first pass looks at every pixel of the box
    [left, right) x [top, bottom) that holds every drawn one (row by row, a branch-free mask the
    compiler vectorises): a slit lies between drawn pixels, so inside it, and so does every pixel
    a pass fills. A later pass looks only at the neighbours of the pixels the pass before filled
    (only they can have become slits). Returns -1 when out of memory."""
    cdef Holes found, judged
    cdef int y, x, q, v, i, n, p, rc = 0
    cdef int nb[4]
    cdef unsigned char any_hole
    cdef uint64_t word
    cdef unsigned char* mask
    cdef const unsigned char* up
    cdef const unsigned char* row
    cdef const unsigned char* down
    left = left if left > 1 else 1
    top = top if top > 1 else 1
    right = right if right < width - 1 else width - 1
    bottom = bottom if bottom < height - 1 else height - 1
    if passes < 1 or height < 3 or width < 3 or left >= right or top >= bottom:
        return 0
    mask = <unsigned char*>malloc(width + 8)
    if mask == NULL:
        return -1
    memset(mask, 0, width + 8)
    found.at, found.colour, found.n, found.cap = NULL, NULL, 0, 0
    judged.at, judged.colour, judged.n, judged.cap = NULL, NULL, 0, 0
    for y in range(top, bottom):
        up, row, down = o + (y - 1) * width, o + y * width, o + (y + 1) * width
        any_hole = 0
        for x in range(left, right):
            mask[x] = (row[x] == bg) & (((up[x] != bg) & (down[x] != bg)) | ((row[x - 1] != bg) & (row[x + 1] != bg)))
            any_hole |= mask[x]
        if not any_hole:
            continue
        x = left
        while x < right:
            memcpy(&word, mask + x, 8)
            if word == 0:
                x += 8
                continue
            if mask[x] and x < right:
                q = y * width + x
                if _push(&found, q, <unsigned char>_slit_colour(o, q, width, bg)) != 0:
                    rc = -1
                    break
            x += 1
        if rc != 0:
            break
    free(mask)
    nb[0], nb[1], nb[2], nb[3] = -width, width, -1, 1
    if rc == 0:
        for i in range(found.n):
            o[found.at[i]] = found.colour[i]
        for p in range(passes - 1):
            if found.n == 0:
                break
            # judge the filled pixels' neighbours off the edge, then fill; a pixel judged twice is filled once
            judged.n = 0
            for i in range(found.n):
                for n in range(4):
                    q = found.at[i] + nb[n]
                    y = q // width
                    x = q - y * width
                    if 1 <= y <= height - 2 and 1 <= x <= width - 2:
                        v = _slit_colour(o, q, width, bg)
                        if v >= 0 and _push(&judged, q, <unsigned char>v) != 0:
                            rc = -1
                            break
                if rc != 0:
                    break
            if rc != 0:
                break
            found.n = 0
            for i in range(judged.n):
                if o[judged.at[i]] == bg:
                    o[judged.at[i]] = judged.colour[i]
                    if _push(&found, judged.at[i], judged.colour[i]) != 0:
                        rc = -1
                        break
            if rc != 0:
                break
    free(found.at)
    free(found.colour)
    free(judged.at)
    free(judged.colour)
    return rc


def fill_outside(const unsigned char[:, :, ::1] rgba, int threshold):
    """The RGB of an (H, W, 4) uint8 image whose pixels with alpha below ``threshold`` take, channel
    by channel, the median of the others: the value of ``numpy.median`` (for an even count the
    mean of the two middle values) rounded down, as ``astype(uint8)`` does. Unchanged where no
    pixel reaches the threshold.

    So a median filter run next near the drawing's edge sees the drawing's own colours, not the
    paper's or the resize's dark fringe.

    Returns:
        (H, W, 3) uint8.
    """
    if rgba.shape[2] != 4:
        raise ValueError(f"expected an (H, W, 4) image, got ({rgba.shape[0]}, {rgba.shape[1]}, {rgba.shape[2]})")
    cdef Py_ssize_t H = rgba.shape[0], W = rgba.shape[1], y, x
    out_arr = np.empty((H, W, 3), np.uint8)
    cdef unsigned char[:, :, ::1] out = out_arr
    cdef int64_t counts[3][256]
    cdef int64_t n = 0, seen, low_rank, high_rank
    cdef int c, v, low, high
    cdef unsigned char fill[3]
    memset(counts, 0, sizeof(counts))
    with nogil:
        for y in range(H):
            for x in range(W):
                for c in range(3):
                    out[y, x, c] = rgba[y, x, c]
                if rgba[y, x, 3] >= threshold:
                    n += 1
                    for c in range(3):
                        counts[c][rgba[y, x, c]] += 1
        if n > 0:
            low_rank, high_rank = (n - 1) // 2, n // 2  # the middle value's ranks, from 0
            for c in range(3):
                seen, low, high = 0, -1, -1
                for v in range(256):
                    seen += counts[c][v]
                    if low < 0 and seen > low_rank:
                        low = v
                    if seen > high_rank:
                        high = v
                        break
                fill[c] = <unsigned char>((low + high) // 2)
            for y in range(H):
                for x in range(W):
                    if rgba[y, x, 3] < threshold:
                        for c in range(3):
                            out[y, x, c] = fill[c]
    return out_arr

