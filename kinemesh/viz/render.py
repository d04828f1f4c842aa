"""Offscreen rendering of meshes and 4D sequences to PNG / GIF / MP4, and contact sheets.

Everything is drawn by :mod:`kinemesh.viz.raster` (a NumPy z-buffer rasterizer), so it works headless on
CPU from a plain pip install and is deterministic. The picture: shaded surfaces (crease-aware smooth
shading, key + fill light, small specular), per-part colours, dark silhouette and part outlines, a
checkered floor under the lowest point of the whole motion with a soft shadow, and joint axes drawn as
arrows (semi-transparent where hidden by the object). The camera frames the bounding sphere of *all*
frames, so it stays fixed while the object moves. Coordinates are metres, +Z up.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kinemesh.atomic import atomic_path
from kinemesh.errors import ConfigError
from kinemesh.geometry.normalize import normalization
from kinemesh.viz.raster import rasterize

__all__ = [
    "Camera",
    "RenderStyle",
    "SceneRenderer",
    "render_image",
    "render_frames",
    "contact_sheet",
    "render_side_by_side",
    "write_images",
    "PALETTE",
]

# Part colours (sRGB 0..1): muted, distinguishable, readable on a light background.
PALETTE = np.array(
    [
        [0.42, 0.62, 0.85],  # blue
        [0.93, 0.58, 0.31],  # orange
        [0.46, 0.75, 0.46],  # green
        [0.86, 0.42, 0.45],  # red
        [0.67, 0.55, 0.82],  # purple
        [0.80, 0.65, 0.45],  # tan
        [0.92, 0.60, 0.78],  # pink
        [0.55, 0.78, 0.78],  # teal
        [0.85, 0.80, 0.40],  # olive
        [0.62, 0.62, 0.62],  # grey
    ]
)
_ARROW_COLORS = np.array([[0.85, 0.10, 0.10], [0.10, 0.35, 0.90], [0.05, 0.65, 0.20], [0.80, 0.45, 0.0]])

# Camera presets for ``views``: (azimuth deg about +Z from +X, elevation deg).
_VIEW_PRESETS = [(-60.0, 22.0), (20.0, 12.0), (-60.0, 65.0), (120.0, 22.0)]


@dataclass
class RenderStyle:
    """Look of a render. Defaults are tuned for a light background and a 640x480 image."""

    background_top: tuple = (0.93, 0.94, 0.96)  # sky gradient top colour (sRGB 0..1)
    background_bottom: tuple = (0.80, 0.82, 0.86)  # sky gradient bottom colour
    floor: bool = True  # draw a checkered floor under the lowest point of the motion
    shadow: bool = True  # soft shadow of the object on the floor (light from above)
    outline: bool = True  # dark silhouette and part-boundary outlines
    supersample: int = 2  # anti-aliasing factor (renders at supersample x size, then averages)
    fov_deg: float = 35.0  # vertical field of view in degrees
    margin: float = 1.15  # framing margin around the bounding sphere (> 1 leaves space)
    crease_deg: float = 35.0  # faces meeting at more than this angle are shaded with a hard edge
    base_color: tuple = (0.42, 0.62, 0.85)  # colour when there are no part ids
    arrow_scale: float = 0.4  # joint-axis arrow length as a fraction of the object's bounding diameter
    azimuth: float = 0.0  # every camera turned by this many degrees about +Z (e.g. 180 to face an object's -x side)


def facing_turn(rest: np.ndarray, frames: np.ndarray, min_motion: float = 0.01, min_offset: float = 0.05) -> float:
    """Degrees to turn the default cameras about +Z (``RenderStyle.azimuth``) so that the first one looks, at the
    preset's three-quarter angle, at the side of the object that moves: the motion-weighted centroid of the
    vertices where they moved furthest (weights: each vertex's largest displacement over ``frames``; a drawer
    counts where it slid out to) relative to the centre of the rest bounding box gives that side's direction.
    0 (the preset) when nothing moves by ``min_motion`` x the size or the motion is central (offset below
    ``min_offset`` x the size: a squashed toy, a draped cloth). PartNet-Mobility objects face -x, so their doors
    and knobs were seen from behind by the preset camera.

    rest (N, 3), frames (T, N, 3) metres."""
    rest = np.asarray(rest, np.float64).reshape(-1, 3)
    frames = np.asarray(frames, np.float64).reshape(-1, *rest.shape)
    size = float(np.ptp(rest, axis=0).max()) if len(rest) else 0.0
    if size <= 0 or not len(frames):
        return 0.0
    d = np.linalg.norm(frames - rest[None], axis=2)  # (T, N)
    w = d.max(axis=0)
    if not np.isfinite(w).all() or w.max() < min_motion * size:
        return 0.0
    far = frames[d.argmax(axis=0), np.arange(len(rest))]  # each vertex where it moved furthest
    offset = (w @ far[:, :2]) / w.sum() - 0.5 * (rest[:, :2].min(0) + rest[:, :2].max(0))
    if np.linalg.norm(offset) < min_offset * size:
        return 0.0
    side = float(np.degrees(np.arctan2(offset[1], offset[0])))
    # the first preset camera sits at azimuth -60 deg, 30 deg round from the -y side it faces
    return float((side + 30.0 - _VIEW_PRESETS[0][0] + 180.0) % 360.0 - 180.0)


def opening_turn(obj, open_fraction: float = 0.6) -> float:
    """:func:`facing_turn` of an articulated object (``kinemesh.data.articulated.ArticulatedObject``): its rest
    pose against every joint opened to ``open_fraction`` of its range (``open_values``), so the camera faces
    the side its doors and drawers open towards (a PartNet-Mobility microwave faces -x). 0 (the preset) for an
    object without movable joints."""
    if not obj.movable_joints:
        return 0.0
    rest = obj.merged(None)[0]
    return facing_turn(rest, np.stack([rest, obj.merged(obj.open_values(open_fraction))[0]]))


@dataclass
class Camera:
    """A pinhole camera looking at ``target`` from ``eye`` (metres, world frame, +Z up)."""

    eye: np.ndarray
    target: np.ndarray
    width: int = 640
    height: int = 480
    fov_deg: float = 35.0  # vertical field of view
    up: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))

    def basis(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Right, up and forward unit vectors (rows of the world-to-camera rotation)."""
        f = np.asarray(self.target, float) - np.asarray(self.eye, float)
        f /= np.linalg.norm(f)
        r = np.cross(f, self.up)
        if np.linalg.norm(r) < 1e-8:  # looking straight down/up: pick any right vector
            r = np.cross(f, [0.0, 1.0, 0.0])
        r /= np.linalg.norm(r)
        u = np.cross(r, f)
        return r, u, f

    @property
    def focal(self) -> float:
        """Focal length in pixels."""
        return 0.5 * self.height / np.tan(np.radians(self.fov_deg) / 2)

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World points (..., 3) -> pixel coordinates (..., 2) (x right, y down) and view depth (...,)."""
        r, u, f = self.basis()
        d = np.asarray(points, np.float64) - np.asarray(self.eye, np.float64)
        xc, yc, zc = d @ r, d @ u, d @ f
        safe = np.where(np.abs(zc) < 1e-12, 1e-12, zc)
        px = 0.5 * self.width + self.focal * xc / safe
        py = 0.5 * self.height - self.focal * yc / safe
        return np.stack([px, py], axis=-1), zc

    @classmethod
    def framing(
        cls,
        points: np.ndarray,
        azimuth_deg: float = -60.0,
        elevation_deg: float = 22.0,
        width: int = 640,
        height: int = 480,
        fov_deg: float = 35.0,
        margin: float = 1.08,
    ) -> "Camera":
        """Camera that keeps the bounding sphere of ``points`` (..., 3) fully in view from the given angle."""
        pts = np.asarray(points, np.float64).reshape(-1, 3)
        pts = pts[np.isfinite(pts).all(axis=1)]
        if pts.size == 0:
            pts = np.zeros((1, 3))
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        center = 0.5 * (lo + hi)
        radius = max(float(np.sqrt(((pts - center) ** 2).sum(axis=1).max())), 1e-6)
        half_v = np.radians(fov_deg) / 2
        half_h = np.arctan(np.tan(half_v) * width / height)
        dist = margin * radius / np.sin(min(half_v, half_h))
        az, el = np.radians(azimuth_deg), np.radians(elevation_deg)
        direction = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
        return cls(eye=center + dist * direction, target=center, width=width, height=height, fov_deg=fov_deg)


def _as_axes(axes, n_frames: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Normalise ``axes`` to a list of (origins (T,3), unit directions (T,3))."""
    out = []
    for i, item in enumerate(axes or []):
        try:
            origin, direction = item
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"axes[{i}] must be an (origin, direction) pair") from exc
        o = np.broadcast_to(np.asarray(origin, np.float64), (n_frames, 3)).copy()
        d = np.broadcast_to(np.asarray(direction, np.float64), (n_frames, 3)).copy()
        norm = np.linalg.norm(d, axis=1, keepdims=True)
        if not np.all(np.isfinite(o)) or not np.all(norm > 1e-12):
            raise ConfigError(f"axes[{i}] has a non-finite origin or a zero direction")
        out.append((o, d / norm))
    return out


def arrow_mesh(origin, direction, length: float, radius: float, segments: int = 12):
    """Triangle mesh of an arrow through ``origin`` along unit ``direction`` (shaft + cone).

    The shaft starts 0.35 * length behind the origin so the axis line is visible on both sides of a hinge.
    Returns (vertices (n, 3), faces (m, 3)).
    """
    d = np.asarray(direction, np.float64)
    d = d / np.linalg.norm(d)
    a = np.array([1.0, 0.0, 0.0]) if abs(d[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = np.cross(d, a)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(d, e1)
    ang = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    ring = np.cos(ang)[:, None] * e1 + np.sin(ang)[:, None] * e2
    o = np.asarray(origin, np.float64)
    start, neck, tip = o - 0.35 * length * d, o + 0.65 * length * d, o + 1.0 * length * d
    v = np.concatenate(
        [
            start + radius * ring,  # 0..s-1
            neck + radius * ring,  # s..2s-1
            neck + 2.6 * radius * ring,  # 2s..3s-1
            [tip, start, neck],  # 3s, 3s+1, 3s+2
        ]
    )
    s = segments
    i = np.arange(s)
    j = (i + 1) % s
    faces = np.concatenate(
        [
            np.stack([i, j, s + j], 1),
            np.stack([i, s + j, s + i], 1),  # shaft
            np.stack([2 * s + i, 2 * s + j, np.full(s, 3 * s)], 1),  # cone
            np.stack([np.full(s, 3 * s + 1), j, i], 1),  # shaft cap
            np.stack([np.full(s, 3 * s + 2), 2 * s + i, 2 * s + j], 1),  # cone base
        ]
    )
    return v, faces


def _vertex_normals(v: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit face normals (m,3) and area-weighted unit vertex normals (n,3)."""
    tri = v[faces]
    fn = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    vn = np.zeros_like(v)
    for k in range(3):
        for c in range(3):
            vn[:, c] += np.bincount(faces[:, k], weights=fn[:, c], minlength=len(v))
    fn /= np.maximum(np.linalg.norm(fn, axis=1, keepdims=True), 1e-20)
    vn /= np.maximum(np.linalg.norm(vn, axis=1, keepdims=True), 1e-20)
    return fn, vn


def _closed_outward(v: np.ndarray, faces: np.ndarray) -> bool:
    """True if every edge is shared by exactly two faces with opposite orientation and the mesh has
    positive signed volume (outward normals): then back faces can be culled safely."""
    if len(faces) == 0 or len(v) == 0:
        return False
    n = np.int64(len(v))
    a = faces[:, [0, 1, 2]].reshape(-1).astype(np.int64)
    b = faces[:, [1, 2, 0]].reshape(-1).astype(np.int64)
    fwd = np.sort(a * n + b)
    if np.any(fwd[1:] == fwd[:-1]):  # a directed edge used twice: inconsistent orientation
        return False
    if not np.array_equal(fwd, np.sort(b * n + a)):  # an edge without its opposite: open or non-manifold
        return False
    tri = v[faces]
    vol = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6.0
    return bool(vol > 0)


def _downsample(img: np.ndarray, s: int) -> np.ndarray:
    """Average s x s pixel blocks of an (H, W, C) image."""
    if s == 1:
        return img
    h, w = img.shape[0] // s, img.shape[1] // s
    img = img[: h * s, : w * s]
    out = img[0::s, 0::s].astype(np.float32, copy=True)
    for i in range(s):  # strided adds are much faster than a reduce over interleaved axes
        for j in range(s):
            if i or j:
                out += img[i::s, j::s]
    return out * np.float32(1.0 / (s * s))


def _blur(mask: np.ndarray, sigma: float) -> np.ndarray:
    from scipy.ndimage import gaussian_filter

    return gaussian_filter(mask, sigma) if sigma > 0 else mask


class SceneRenderer:
    """Renders frames of one moving mesh with a camera, floor and shadow fixed over the whole motion.

    Parameters
    ----------
    all_points : (T, N, 3) or (N, 3) float, every vertex position the motion visits (fixes framing and floor).
    faces : (M, 3) int triangle indices.
    part_ids : (N,) int part label per vertex, or None (one colour).
    size : (width, height) of each view in pixels.
    views : number of camera views tiled side by side (1-4 use presets; more spread evenly around).
    style : RenderStyle.
    vertex_colors : optional (N, 3) float 0..1 colours overriding the part colours.
    """

    def __init__(
        self,
        all_points: np.ndarray,
        faces: np.ndarray,
        part_ids: np.ndarray | None = None,
        size: tuple[int, int] = (640, 480),
        views: int = 1,
        style: RenderStyle | None = None,
        vertex_colors: np.ndarray | None = None,
        extra_points: np.ndarray | None = None,
    ):
        self.style = style or RenderStyle()
        pts = np.asarray(all_points, np.float64).reshape(-1, 3)
        if len(pts) > 200_000:  # framing only needs the extent
            pts = pts[np.linspace(0, len(pts) - 1, 200_000).astype(np.int64)]
        self.faces = np.asarray(faces, np.int64).reshape(-1, 3)
        if views < 1:
            raise ConfigError(f"views must be >= 1, got {views}")
        width, height = int(size[0]), int(size[1])
        if width < 16 or height < 16:
            raise ConfigError(f"image size must be at least 16x16 pixels, got {width}x{height}")
        self.width, self.height, self.views = width, height, int(views)
        frame_pts = pts
        if extra_points is not None:
            frame_pts = np.concatenate([pts, np.asarray(extra_points).reshape(-1, 3)])
        self.cameras = []
        for k in range(self.views):
            if self.views <= len(_VIEW_PRESETS):
                az, el = _VIEW_PRESETS[k]
            else:
                az, el = -60.0 + 360.0 * k / self.views, 22.0
            az += float(self.style.azimuth)
            self.cameras.append(
                Camera.framing(frame_pts, az, el, width, height, self.style.fov_deg, self.style.margin)
            )
        self.center, inv = normalization(pts, size="diagonal")
        self.diameter = 1.0 / inv
        self.floor_z = float(pts[:, 2].min()) - 0.002 * self.diameter
        self.floor_half = 1.6 * self.diameter
        # Light for the shadow travels mostly downward, tilted towards the first camera's lower right so
        # the shadow peeks out in front of the object instead of hiding behind it.
        r0, _, f0 = self.cameras[0].basis()
        sd = np.array([0.0, 0.0, -1.0]) + 0.35 * r0 - 0.25 * f0
        sd[2] = -1.0
        self.shadow_dir = sd / np.linalg.norm(sd)
        self._floor_cache: dict[int, tuple] = {}
        self.face_colors = self._face_colors(part_ids, vertex_colors, len(pts))
        first = np.asarray(all_points, np.float64).reshape(-1, 3)[: int(self.faces.max(initial=-1)) + 1]
        self.closed = _closed_outward(first, self.faces)
        self.face_part = None
        if part_ids is not None:
            pid = np.asarray(part_ids).reshape(-1)
            self.face_part = pid[self.faces[:, 0]]

    # ------------------------------------------------------------------ colours
    def _face_colors(self, part_ids, vertex_colors, n_points) -> np.ndarray:
        if vertex_colors is not None:
            vc = np.asarray(vertex_colors, np.float64).reshape(-1, 3)
            return vc[self.faces].mean(axis=1)
        if part_ids is None:
            return np.broadcast_to(np.asarray(self.style.base_color, np.float64), (len(self.faces), 3))
        pid = np.asarray(part_ids).reshape(-1)
        _, dense = np.unique(pid, return_inverse=True)
        return PALETTE[dense[self.faces[:, 0]] % len(PALETTE)]

    # ------------------------------------------------------------------ shading
    def _hires(self, cam: Camera) -> Camera:
        s = max(int(self.style.supersample), 1)
        return Camera(cam.eye, cam.target, cam.width * s, cam.height * s, cam.fov_deg, cam.up)

    def _shade_mesh(self, cam: Camera, v, faces, face_colors, cull_back: bool = False, window=None):
        """Rasterize and shade one mesh in ``window`` = (x0, y0, w, h) pixels of ``cam`` (default: all of it).

        Returns (hit (K,) flat pixel indices, rgb (K, 3) float32, depth (h*w,), face_id (h*w,)) of the window.
        """
        x0, y0, w, h = window or (0, 0, cam.width, cam.height)
        xy, zc = cam.project(v)
        frags = rasterize(xy[faces] - (x0, y0), zc[faces], w, h, cull_back=cull_back)
        fid = frags.face_id
        hit = np.flatnonzero(fid >= 0)
        if hit.size == 0:
            return hit, np.zeros((0, 3), np.float32), frags.depth, fid
        fn, vn = _vertex_normals(v, faces)
        f = fid[hit]
        bary = frags.bary[hit]
        # Crease-aware corner normals: a corner whose smooth vertex normal bends more than crease_deg away
        # from its face uses the face normal (hard edges on boxes, smooth shading on curved surfaces).
        corner = vn[faces]  # (M, 3, 3)
        smooth_ok = (corner * fn[:, None, :]).sum(axis=2) > np.cos(np.radians(self.style.crease_deg))
        corner = np.where(smooth_ok[:, :, None], corner, fn[:, None, :])
        # Gouraud shading: light each corner once and interpolate the intensity per pixel. Far cheaper
        # than per-pixel normals and exact on flat parts (whose corners carry the face normal).
        r, u, fwd = cam.basis()
        toward = (fn @ fwd) > 0  # two-sided lighting: flip faces seen from behind
        corner = np.where(toward[:, None, None], -corner, corner)
        # Lights defined in camera space so every view is lit the same way.
        key = -fwd * 0.6 + u * 0.65 - r * 0.45
        key /= np.linalg.norm(key)
        fill = -fwd * 0.8 - u * 0.2 + r * 0.55
        fill /= np.linalg.norm(fill)
        half = key - fwd
        half /= np.linalg.norm(half)
        nk = np.clip(corner @ key, 0, None)
        nh = np.clip(corner @ half, 0, None)
        lam = 0.32 + 0.62 * nk + 0.22 * np.clip(corner @ fill, 0, None)  # (M, 3)
        nh2 = nh * nh
        nh8 = (nh2 * nh2) ** 2
        spec = 0.18 * nh8 * (nh8 * nh8) ** 2  # nh ** 40 without a slow pow
        lam = lam.astype(np.float32)
        spec = spec.astype(np.float32)
        b0, b1, b2 = bary[:, 0], bary[:, 1], bary[:, 2]
        li = b0 * lam[f, 0] + b1 * lam[f, 1] + b2 * lam[f, 2]
        sp = b0 * spec[f, 0] + b1 * spec[f, 1] + b2 * spec[f, 2]
        col = face_colors.astype(np.float32)[f] * li[:, None] + sp[:, None]
        return hit, col, frags.depth, fid

    def _background(self, cam: Camera, shadow_map) -> np.ndarray:
        """Sky gradient and checkered floor with the object's shadow at output resolution: a new (H*W, 3) float32.

        The floor lies at the lowest point of the whole motion, so the object always occludes it: no
        depth test against the floor is needed and the floor can be drawn at output resolution.
        """
        key = id(cam)
        if key not in self._floor_cache:
            self._floor_cache[key] = self._floor_setup(cam)
        bg, idx, floor_col, fade, fx, fy = self._floor_cache[key]
        if idx.size == 0 or shadow_map is None:
            return bg.copy()
        sm, x0, y0, res, n = shadow_map
        from scipy.ndimage import map_coordinates

        rows = np.flatnonzero(sm.max(axis=1) > 1e-3)
        cols = np.flatnonzero(sm.max(axis=0) > 1e-3)
        if rows.size == 0:
            return bg.copy()
        gy, gx = (fy - y0) / res - 0.5, (fx - x0) / res - 0.5
        near = (gy >= rows[0] - 1) & (gy <= rows[-1] + 1) & (gx >= cols[0] - 1) & (gx <= cols[-1] + 1)
        near = np.flatnonzero(near)
        # Bilinear lookup: nearest-neighbour steps of the blurred map show as bands on the floor.
        shade = map_coordinates(sm, [gy[near], gx[near]], order=1, mode="constant")
        out = bg.copy()
        out[idx[near]] -= (fade[near] * floor_col[near] * (0.45 * shade)[:, None]).astype(np.float32)
        return out

    def _floor_setup(self, cam: Camera):
        """Per-camera constants: background without shadow, floor pixels, colours, rim fade, floor xy."""
        W, H = cam.width, cam.height
        r, u, f = cam.basis()
        t = np.linspace(0, 1, H)[:, None]
        sky = (1 - t) * np.asarray(self.style.background_top) + t * np.asarray(self.style.background_bottom)
        bg = np.repeat(sky, W, axis=0)
        empty = np.zeros(0, np.int64)
        if not self.style.floor:
            return bg.astype(np.float32), empty, None, None, None, None
        s = 2  # the checker edges are anti-aliased by averaging 2x2 samples per pixel
        ys, xs = np.mgrid[0 : H * s, 0 : W * s]
        a = ((xs.reshape(-1) + 0.5) / s - 0.5 * W) / cam.focal
        b = -((ys.reshape(-1) + 0.5) / s - 0.5 * H) / cam.focal
        dz = f[2] + a * r[2] + b * u[2]
        with np.errstate(divide="ignore", invalid="ignore"):
            tz = (self.floor_z - cam.eye[2]) / dz
            valid = np.isfinite(tz) & (tz > 0)
            px = cam.eye[0] + tz * (f[0] + a * r[0] + b * u[0])
            py = cam.eye[1] + tz * (f[1] + a * r[1] + b * u[1])
            dx, dy = px - self.center[0], py - self.center[1]
            rad = np.where(valid, np.sqrt(dx**2 + dy**2) / self.floor_half, np.inf)
        cell = self.diameter / 6.0
        with np.errstate(invalid="ignore"):
            checker = np.nan_to_num((np.floor(dx / cell) + np.floor(dy / cell)) % 2)
        floor_col = np.where(checker[:, None] > 0, [0.86, 0.86, 0.84], [0.76, 0.77, 0.76])
        # Fade the floor into the background towards its rim.
        fade = np.clip((1.0 - rad) / 0.35, 0.0, 1.0) ** 1.5
        floor_col = _downsample(floor_col.reshape(H * s, W * s, 3), s).reshape(-1, 3)
        fade = _downsample(fade.reshape(H * s, W * s, 1), s).reshape(-1)
        px = _downsample(np.nan_to_num(px).reshape(H * s, W * s, 1), s).reshape(-1)
        py = _downsample(np.nan_to_num(py).reshape(H * s, W * s, 1), s).reshape(-1)
        bg = fade[:, None] * floor_col + (1 - fade[:, None]) * bg
        idx = np.flatnonzero(fade > 0)
        return bg.astype(np.float32), idx, floor_col[idx], fade[idx, None], px[idx], py[idx]

    def _shadow_map(self, v: np.ndarray, faces: np.ndarray, n: int = 256):
        """Soft shadow coverage on the floor from the downward light: (mask (n,n), x0, y0, cell, n)."""
        height = v[:, 2] - self.floor_z
        proj = v - (height / self.shadow_dir[2])[:, None] * self.shadow_dir
        x0 = self.center[0] - self.floor_half
        y0 = self.center[1] - self.floor_half
        res = 2 * self.floor_half / n
        xy = np.stack([(proj[:, 0] - x0) / res, (proj[:, 1] - y0) / res], axis=1)
        frags = rasterize(xy[faces], np.ones(faces.shape), n, n)
        mask = (frags.face_id >= 0).reshape(n, n).astype(np.float64)
        mask = _blur(mask, sigma=max(1.0, 0.012 * n))
        return (np.clip(mask, 0, 1), x0, y0, res, n)

    # ------------------------------------------------------------------ frame
    def render(self, vertices: np.ndarray, axes: list | None = None, view: int | None = None) -> np.ndarray:
        """Render one frame.

        Parameters
        ----------
        vertices : (N, 3) float vertex positions (metres).
        axes : list of (origin (3,), unit direction (3,)) arrows to draw, or None.
        view : render only this camera index; default: all views tiled left to right.

        Returns
        -------
        (height, width * n_views, 3) uint8 image.
        """
        v = np.asarray(vertices, np.float64).reshape(-1, 3)
        st = self.style
        s = max(int(st.supersample), 1)
        cams = self.cameras if view is None else [self.cameras[view]]
        shadow = self._shadow_map(v, self.faces) if (st.floor and st.shadow and len(self.faces)) else None
        arrows = None
        if axes:
            av, af, ac = [], [], []
            off = 0
            length = st.arrow_scale * self.diameter
            for i, (o, d) in enumerate(axes):
                va, fa = arrow_mesh(o, d, length, 0.01 * self.diameter)
                av.append(va)
                af.append(fa + off)
                ac.append(np.broadcast_to(_ARROW_COLORS[i % len(_ARROW_COLORS)], (len(fa), 3)))
                off += len(va)
            arrows = (np.concatenate(av), np.concatenate(af), np.concatenate(ac))
        tiles = []
        for cam in cams:
            H, W = cam.height, cam.width
            out = self._background(cam, shadow).reshape(H, W, 3)
            # Only the object's screen box (plus one pixel for its outline) is rasterized at supersample
            # resolution: the rest of the frame is background (the object covers a fraction of the frame).
            pts = v if arrows is None else np.concatenate([v, arrows[0]])
            xy, _ = cam.project(pts)
            x0, y0 = np.clip(np.floor(xy.min(axis=0)).astype(int) - 1, 0, (W, H))
            x1, y1 = np.clip(np.ceil(xy.max(axis=0)).astype(int) + 1, 0, (W, H))
            if x1 <= x0 or y1 <= y0:
                tiles.append(out)
                continue
            hc, win = self._hires(cam), (x0 * s, y0 * s, (x1 - x0) * s, (y1 - y0) * s)
            hit, col, depth, fid = self._shade_mesh(hc, v, self.faces, self.face_colors, self.closed, win)
            # One buffer: premultiplied rgb, coverage alpha, outline mask; averaged down in one pass.
            buf = np.zeros((win[2] * win[3], 5), np.float32)
            buf[hit, :3] = col
            buf[hit, 3] = 1.0
            if st.outline:
                buf[:, 4] = self._edges(win[3], win[2], depth, fid)
            if arrows is not None:
                ahit, acol, adepth, _ = self._shade_mesh(hc, *arrows, window=win)
                behind = depth[ahit] < adepth[ahit]
                # Hidden parts of an arrow show through the object at 45 % opacity (x-ray).
                buf[ahit, :3] = np.where(behind[:, None], 0.45 * acol + 0.55 * buf[ahit, :3], acol)
                buf[ahit, 3] = 1.0
                buf[ahit[~behind], 4] = 0.0
            small = _downsample(buf.reshape(win[3], win[2], 5), s)
            box = small[..., :3] + (1.0 - small[..., 3:4]) * out[y0:y1, x0:x1]
            if st.outline:
                box *= 1.0 - 0.65 * np.minimum(1.0, small[..., 4:5] * s)
            out[y0:y1, x0:x1] = box
            tiles.append(out)
        img = np.concatenate(tiles, axis=1)
        return (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)

    def _edges(self, H: int, W: int, depth, fid) -> np.ndarray:
        """Flat (H*W,) bool mask of silhouette, depth-discontinuity and part-boundary pixels of an H x W image."""
        on = fid >= 0
        m = on.reshape(H, W)
        d = np.where(on, depth, np.float32(1e30)).astype(np.float32).reshape(H, W)
        use_part = self.face_part is not None and len(np.unique(self.face_part)) > 1
        if use_part:
            part = np.full(H * W, -1, np.int32)
            part[on] = self.face_part[fid[on]]
            part = part.reshape(H, W)
        edge = np.zeros((H, W), bool)
        jump = np.float32(0.02 * self.diameter)
        for sl_a, sl_b in (
            ((slice(1, None), slice(None)), (slice(None, -1), slice(None))),
            ((slice(None), slice(1, None)), (slice(None), slice(None, -1))),
        ):
            da, db = d[sl_a], d[sl_b]
            e = np.abs(da - db) > jump  # includes the silhouette (object vs background at 1e30)
            if use_part:
                e |= part[sl_a] != part[sl_b]
            # Mark both pixels of each discontinuity: lines about one output pixel wide at supersample 2.
            edge[sl_a] |= e
            edge[sl_b] |= e
        return edge.reshape(-1)


def render_image(
    vertices: np.ndarray,
    faces: np.ndarray,
    part_ids: np.ndarray | None = None,
    axes: list | None = None,
    views: int = 1,
    size: tuple[int, int] = (640, 480),
    style: RenderStyle | None = None,
) -> np.ndarray:
    """Render one mesh to an image.

    vertices (N, 3) float metres, faces (M, 3) int, part_ids (N,) int or None, axes list of
    (origin (3,), direction (3,)). Returns (height, width * views, 3) uint8.
    """
    ax = _as_axes(axes, 1)
    tips = _axis_extent_points(ax, vertices)
    r = SceneRenderer(vertices, faces, part_ids, size=size, views=views, style=style, extra_points=tips)
    return r.render(vertices, axes=[(o[0], d[0]) for o, d in ax])


def _axis_extent_points(ax, points) -> np.ndarray | None:
    """End points of the drawn arrows, so the framing keeps them in view."""
    if not ax:
        return None
    L = RenderStyle().arrow_scale / normalization(np.reshape(points, (-1, 3)), size="diagonal")[1]
    return np.concatenate([np.concatenate([o - 0.35 * L * d, o + L * d]) for o, d in ax])


def _check_frames(frames, faces):
    frames = np.asarray(frames, np.float64)
    if frames.ndim == 2:
        frames = frames[None]
    if frames.ndim != 3 or frames.shape[-1] != 3 or frames.shape[0] == 0:
        raise ConfigError(f"frames must have shape (T, N, 3) with T >= 1, got {frames.shape}")
    faces = np.asarray(faces)
    if faces.ndim != 2 or faces.shape[1] != 3:
        raise ConfigError(f"faces must have shape (M, 3), got {faces.shape}")
    if faces.size and (faces.min() < 0 or faces.max() >= frames.shape[1]):
        raise ConfigError(f"faces index vertices outside 0..{frames.shape[1] - 1}")
    if not np.isfinite(frames).all():
        raise ConfigError("frames contain NaN or infinite vertex positions")
    return frames, faces.astype(np.int64)


def write_images(images: Iterable[np.ndarray], out_path: str | os.PathLike, fps: float = 30.0) -> Path:
    """Write uint8 images (H, W, 3) atomically as .mp4 (H.264), .gif (looping) or .png (one image or a grid).

    ``images`` may be a generator: an .mp4 is encoded as the images arrive (memory stays flat for long
    videos). A .png of several images is a grid of up to 8 evenly spaced images (up to 4 per row, fewer
    when wide). GIF encoders
    merge identical consecutive frames into one longer frame (same playback timing).

    Raises
    ------
    ConfigError for an unsupported extension, no images or a non-positive fps.
    """
    import imageio.v3 as iio

    out_path = Path(out_path)
    ext = out_path.suffix.lower()
    if ext not in (".mp4", ".gif", ".png"):
        raise ConfigError(f"--out {out_path}: unsupported extension {ext!r} (use .mp4, .gif or .png)")
    if not fps > 0:
        raise ConfigError(f"fps must be positive, got {fps}")
    with atomic_path(out_path) as tmp:
        if ext in (".png", ".gif"):
            images = list(images)
            if not images:
                raise ConfigError("nothing to write: no frames")
            if ext == ".png":
                if len(images) == 1:
                    grid = images[0]
                else:
                    pick = np.unique(np.linspace(0, len(images) - 1, min(8, len(images))).round().astype(int))
                    # up to 4 per row, fewer when the images are wide (several views or tiles)
                    cols = max(1, min(4, len(pick), 2560 // max(images[0].shape[1], 1)))
                    grid = _grid([images[i] for i in pick], cols=cols)
                iio.imwrite(tmp, grid, extension=".png")
            else:
                iio.imwrite(tmp, np.stack(images), extension=".gif", duration=1000.0 / fps, loop=0)
        else:
            import imageio.v2 as iio2

            writer = None
            try:
                for im in images:
                    if writer is None:
                        h, w = im.shape[:2]
                        writer = iio2.get_writer(
                            tmp,
                            format="FFMPEG",
                            mode="I",
                            fps=fps,
                            codec="libx264",
                            quality=7,
                            pixelformat="yuv420p",
                            macro_block_size=1,
                            # yuv420p needs even sizes; x264 "veryfast": half the CPU of its default
                            # "medium" at the same file size, 0.4 dB PSNR lower (41-42 dB on the demo videos)
                            output_params=["-vf", f"pad={w + w % 2}:{h + h % 2}", "-preset", "veryfast"],
                            ffmpeg_log_level="error",
                        )
                    writer.append_data(np.ascontiguousarray(im))
            finally:
                if writer is not None:
                    writer.close()
            if writer is None:
                raise ConfigError("nothing to write: no frames")
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; renders are meant to be shared
    return out_path


def _grid(images: list[np.ndarray], cols: int, pad: int = 4, fill: int = 255) -> np.ndarray:
    h = max(im.shape[0] for im in images)
    w = max(im.shape[1] for im in images)
    rows = (len(images) + cols - 1) // cols
    out = np.full((rows * h + (rows + 1) * pad, cols * w + (cols + 1) * pad, 3), fill, np.uint8)
    for i, im in enumerate(images):
        r, c = divmod(i, cols)
        y, x = pad + r * (h + pad), pad + c * (w + pad)
        out[y : y + im.shape[0], x : x + im.shape[1]] = im[..., :3]
    return out


def render_frames(
    frames: np.ndarray,
    faces: np.ndarray,
    out_path: str | os.PathLike,
    fps: float = 30,
    part_ids: np.ndarray | None = None,
    axes: list | None = None,
    views: int = 1,
    size: tuple[int, int] = (640, 480),
    style: RenderStyle | None = None,
    progress: bool = True,
    titles: Sequence[str] | None = None,
) -> Path:
    """Render a moving mesh to a video (.mp4), animated GIF (.gif) or still / frame grid (.png).

    Parameters
    ----------
    frames : (T, N, 3) float vertex positions per frame, metres, +Z up ((N, 3) is one frame).
    faces : (M, 3) int triangle indices, shared by all frames.
    out_path : output file; the extension picks the format. Written atomically.
    fps : frames per second of the video / GIF.
    part_ids : (N,) int part label per vertex (one colour per part), or None.
    axes : joint axes drawn as arrows: list of (origin, direction) with each (3,) or per frame (T, 3).
    views : number of camera views tiled side by side (front 3/4, side, top, back).
    size : (width, height) of each view in pixels.
    style : RenderStyle overrides.
    progress : show a tqdm progress bar.
    titles : optional per-frame caption drawn in the top-left corner.

    Returns the written path. The camera, floor and shadow light are fixed over the whole motion.

    Raises
    ------
    ConfigError for bad shapes, non-finite vertices, an unsupported extension or bad options.
    """
    from kinemesh.progress import tqdm

    frames, faces = _check_frames(frames, faces)
    T = frames.shape[0]
    ax = _as_axes(axes, T)
    if part_ids is not None and np.asarray(part_ids).reshape(-1).shape[0] != frames.shape[1]:
        raise ConfigError(
            f"part_ids has {np.asarray(part_ids).size} entries but the mesh has {frames.shape[1]} vertices"
        )
    tips = None
    if ax:
        tips = np.concatenate([_axis_extent_points([(o[t], d[t]) for o, d in ax], frames[t]) for t in
                               np.unique(np.linspace(0, T - 1, min(T, 16)).astype(int))])
    renderer = SceneRenderer(frames, faces, part_ids, size=size, views=views, style=style, extra_points=tips)
    if Path(out_path).suffix.lower() == ".png" and T > 1:  # a still grid shows at most 8 frames
        indices = np.unique(np.linspace(0, T - 1, min(8, T)).round().astype(int))
    else:
        indices = np.arange(T)

    def images():
        bar = tqdm(indices, desc=f"render {Path(out_path).name}", disable=not progress or len(indices) < 2,
                   unit="frame")
        for t in bar:
            img = renderer.render(frames[t], axes=[(o[t], d[t]) for o, d in ax] or None)
            yield _caption(img, str(titles[t])) if titles is not None else img

    return write_images(images(), out_path, fps=fps)


def render_side_by_side(
    items: Sequence[tuple],
    out_path: str | os.PathLike,
    fps: float = 30,
    size: tuple[int, int] = (320, 240),
    style: RenderStyle | None = None,
    progress: bool = True,
) -> Path:
    """Render several motions next to each other in one video / GIF / PNG grid, each framed on its own.

    Parameters
    ----------
    items : list of (frames (T_i, N_i, 3), faces (M_i, 3), part_ids (N_i,) or None, axes or None, title or None);
        axes as in :func:`render_frames`. Shorter motions hold their last frame.
    out_path : .mp4, .gif or .png (written atomically).
    size : (width, height) of each tile in pixels.

    Raises
    ------
    ConfigError for no items, bad shapes or an unsupported extension.
    """
    from kinemesh.progress import tqdm

    if not items:
        raise ConfigError("nothing to render: no inputs")
    tiles = []
    for i, item in enumerate(items):
        try:
            frames, faces, part_ids, axes, title = item
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"items[{i}] must be (frames, faces, part_ids, axes, title)") from exc
        frames, faces = _check_frames(frames, faces)
        ax = _as_axes(axes, frames.shape[0])
        tips = None
        if ax:
            tips = np.concatenate([_axis_extent_points([(o[t], d[t]) for o, d in ax], frames[t])
                                   for t in np.unique(np.linspace(0, len(frames) - 1, 16).astype(int))])
        r = SceneRenderer(frames, faces, part_ids, size=size, style=style, extra_points=tips)
        tiles.append((r, frames, ax, title))
    T = max(len(f) for _, f, _, _ in tiles)
    if Path(out_path).suffix.lower() == ".png" and T > 1:
        indices = np.unique(np.linspace(0, T - 1, min(8, T)).round().astype(int))
    else:
        indices = np.arange(T)

    def images():
        for t in tqdm(indices, desc=f"render {Path(out_path).name}", disable=not progress or len(indices) < 2,
                      unit="frame"):
            row = []
            for r, frames, ax, title in tiles:
                k = min(int(t), len(frames) - 1)
                img = r.render(frames[k], axes=[(o[k], d[k]) for o, d in ax] or None)
                row.append(_caption(img, str(title), size=max(10, size[1] // 16)) if title else img)
            yield np.concatenate(row, axis=1)

    return write_images(images(), out_path, fps=fps)


def _caption(img: np.ndarray, text: str, size: int = 16) -> np.ndarray:
    """Draw ``text`` in the top-left corner (dark text, light halo)."""
    from PIL import Image, ImageDraw, ImageFont

    im = Image.fromarray(img)
    draw = ImageDraw.Draw(im)
    try:
        font = ImageFont.load_default(size=size)
    except TypeError:  # very old Pillow
        font = ImageFont.load_default()
    draw.text((8, 6), text, fill=(20, 20, 20), font=font, stroke_width=2, stroke_fill=(255, 255, 255))
    return np.asarray(im)


def contact_sheet(
    meshes: Sequence[tuple],
    out_png: str | os.PathLike,
    cols: int = 4,
    size: tuple[int, int] = (320, 240),
    style: RenderStyle | None = None,
) -> Path:
    """Render several meshes into one captioned PNG grid, each framed on its own or on a motion.

    Parameters
    ----------
    meshes : list of (vertices (N, 3), faces (M, 3), part_ids (N,) or None, title str[, framing]); ``framing``
        (optional, (T, N, 3) metres): frames of the motion the tile is taken from, which fix the camera and
        floor as in :func:`render_frames`, so that tiles of one motion show it moving; tiles given the same
        framing array (the same object) share one renderer, with the first one's part colours. Default: each
        tile framed on its own vertices.
    out_png : output PNG path (written atomically).
    cols : number of tiles per row.
    size : (width, height) of each tile in pixels.

    Raises
    ------
    ConfigError if ``meshes`` is empty or an entry is malformed.
    """
    if not meshes:
        raise ConfigError("contact_sheet needs at least one mesh")
    if cols < 1:
        raise ConfigError(f"cols must be >= 1, got {cols}")
    tiles, renderers = [], {}
    for i, item in enumerate(meshes):
        try:
            vertices, faces, part_ids, title, *framing = item
            if len(framing) > 1:
                raise ValueError
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"meshes[{i}] must be (vertices, faces, part_ids, title[, framing])") from exc
        v, f = _check_frames(vertices, faces)
        if framing:
            key = id(framing[0])
            if key not in renderers:
                renderers[key] = SceneRenderer(_check_frames(framing[0], f)[0], f, part_ids, size=size, style=style)
            img = renderers[key].render(v[0])
        else:
            img = render_image(v[0], f, part_ids, size=size, style=style)
        tiles.append(_caption(img, str(title), size=max(10, size[1] // 16)))
    out_png = Path(out_png)
    if out_png.suffix.lower() != ".png":
        raise ConfigError(f"{out_png}: contact sheets are written as .png")
    grid = _grid(tiles, cols=min(cols, len(tiles)))
    return write_images([grid], out_png)
