"""The interactive web viewer behind ``kinemesh view``: server-side state (:class:`ViewerApp`) and its
browser GUI (:class:`ViewerGUI`, built on viser).

Every GUI callback calls one :class:`ViewerApp` method, so the whole behaviour is testable without a browser:
play/scrub a 4D sequence, drive joints of articulated inputs, move the reduced coordinates q of the kinematic
model (``kinemesh.model`` + ``kinemesh.reduce``), pick a vertex, drag it (a boundary-condition solve in q)
and let go (latent Lagrangian dynamics from ``kinemesh.dynamics``), and export the current motion as GLB,
NPZ or MP4. Positions are metres, +Z up.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kinemesh.errors import ConfigError, KinemeshError
from kinemesh.viz.inputs import Drawable, joint_axes_at
from kinemesh.viz.render import PALETTE

log = logging.getLogger(__name__)

__all__ = ["ViewerConfig", "ViewerApp", "ViewerGUI", "ray_mesh_pick"]


@dataclass
class ViewerConfig:
    """Options of the viewer's kinematic model and dynamics."""

    checkpoint: str | None = None  # model checkpoint folder; None = the default shipped checkpoint
    device: str = "cpu"  # torch device of the model
    n_points: int = 512  # surface samples carrying the deformation (fewer = faster interaction)
    max_q: int = 8  # at most this many reduced coordinates (sliders)
    subspace_samples: int = 32  # prior samples for the active-subspace estimate
    q_range: float = 3.0  # slider range in prior standard deviations
    sim_seconds: float = 2.0  # duration simulated after letting go of a drag (s)
    sim_fps: float = 15.0  # simulated frames per second; kept low because every step needs derivatives of
    #                        the decoder, the dominant cost on CPU (playback interpolates to play_fps)
    substeps: int = 2  # integrator steps per simulated frame (more are taken automatically when unstable)
    integrator: str = "midpoint"  # implicit midpoint (A-stable: the plausibility barrier is stiff) or rk4
    play_fps: float = 30.0  # playback rate; q is interpolated linearly between simulated frames
    kind: str = "auto"  # articulated | elastic | cloth | auto (kinemesh.dynamics.scene per-kind defaults)
    stiffness_hz: float | None = None  # latent elastic stiffness as a natural frequency; None = kind default
    damping: float | None = None  # Rayleigh mass damping alpha (1/s); None = kind default
    gravity: bool = False  # gravity on during dynamics (-9.81 m/s^2 along Z)
    basis: str = "auto"  # what spans the reduced coordinates: auto | probes | prior (kinemesh simulate --basis)
    fixed_base: bool | None = None  # hold an articulated object's base part (None = yes when it has parts)


def ray_mesh_pick(
    vertices: np.ndarray, faces: np.ndarray, origin, direction
) -> tuple[int, np.ndarray] | None:
    """First hit of a ray with a triangle mesh (Moller-Trumbore, two-sided).

    vertices (N, 3), faces (M, 3), origin (3,), direction (3,). Returns (nearest vertex of the hit triangle,
    hit point (3,)) or None when the ray misses.
    """
    v = np.asarray(vertices, np.float64)
    f = np.asarray(faces, np.int64)
    o = np.asarray(origin, np.float64).reshape(3)
    d = np.asarray(direction, np.float64).reshape(3)
    d = d / max(np.linalg.norm(d), 1e-12)
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    e1, e2 = b - a, c - a
    p = np.cross(d, e2)
    det = (e1 * p).sum(1)
    ok = np.abs(det) > 1e-14
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    s = o - a
    u = (s * p).sum(1) * inv
    qv = np.cross(s, e1)
    w = (qv @ d) * inv
    t = (e2 * qv).sum(1) * inv
    hit = ok & (u >= 0) & (w >= 0) & (u + w <= 1) & (t > 1e-9)
    if not hit.any():
        return None
    i = int(np.flatnonzero(hit)[np.argmin(t[hit])])
    point = o + t[i] * d
    tri = f[i]
    vid = int(tri[np.argmin(np.linalg.norm(v[tri] - point, axis=1))])
    return vid, point


class ViewerApp:
    """Server-side state of the viewer. Thread-safe; listeners are told when the displayed mesh changes.

    Attributes
    ----------
    vertices : (N, 3) float32, the mesh as currently displayed (metres).
    faces : (M, 3) int64.
    part_ids : (N,) int or None.
    frames : (T, N, 3) float32, the motion loaded for playback (the input sequence, a joint sweep, or the
        last simulated motion); ``frame_index`` is the displayed frame.
    q : (k,) float64 reduced coordinates, or None while no model is loaded.
    last_rollout : (T, k) float64 q of the last simulation at ``config.sim_fps``, or None.
    model_status : one line describing the kinematic model (shown in the GUI).
    """

    def __init__(self, drawable: Drawable, config: ViewerConfig | None = None):
        self.config = config or ViewerConfig()
        self.drawable = drawable
        self.faces = np.asarray(drawable.faces, np.int64)
        self.part_ids = drawable.part_ids
        self.frames = np.asarray(drawable.frames, np.float32)
        self.fps = float(drawable.fps or 30.0)
        self.frame_index = 0
        seq = drawable.sequence
        # The model is bound to the rest shape: a sequence's own rest pose, else the first frame.
        self.rest_vertices = (np.asarray(seq.rest_vertices, np.float32).copy() if seq is not None
                              else self.frames[0].copy())
        self.vertices = self.frames[0].copy()
        self.axes = [(o[0], d[0]) for o, d in drawable.axes]
        self.axis_names = list(drawable.axis_names)
        self.motion_source = "input"
        obj = drawable.articulated
        self.joint_values = {j.name: 0.0 for j in obj.movable_joints} if obj is not None else {}
        self.model_status = "kinematic model not loaded"
        self.model_ok = False
        self.reduced = None
        self._articulation = self._part_names = None  # the joints the dynamics move the parts along
        self._limit_stops = False  # every joint limit a stop (the URDF's joints), else the closed ones only
        self.q: np.ndarray | None = None
        self.selected_vertex: int | None = None
        self.drag_target: np.ndarray | None = None
        self.status = ""
        self.last_rollout = None
        self._play_q = None
        self._session = None
        self.kind: str | None = None
        self.q_rest: np.ndarray | None = None
        self.rest_offset = np.zeros_like(self.rest_vertices)
        self._drag_hist: list[tuple[float, np.ndarray]] = []  # (time s, q) of recent drag solves
        self._lock = threading.RLock()
        self._listeners: list[Callable[[str], None]] = []

    # ------------------------------------------------------------------ listeners
    def add_listener(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(what)`` after every change; ``what`` is "mesh", "frames", "model" or "status"."""
        self._listeners.append(fn)

    def _notify(self, what: str) -> None:
        for fn in list(self._listeners):
            try:
                fn(what)
            except Exception:  # a broken GUI update must not break the state
                log.exception("viewer listener failed")

    def _set_status(self, text: str) -> None:
        self.status = text
        log.info(text)
        self._notify("status")

    # ------------------------------------------------------------------ playback
    @property
    def n_frames(self) -> int:
        return int(self.frames.shape[0])

    def set_frame(self, index: int) -> None:
        """Show frame ``index`` (wrapped into range) of the loaded motion."""
        with self._lock:
            self.frame_index = int(index) % self.n_frames
            self.vertices = self.frames[self.frame_index].copy()
            if self.motion_source == "input" and self.drawable.axes:
                self.axes = [(o[self.frame_index], d[self.frame_index]) for o, d in self.drawable.axes]
        self._notify("mesh")

    def step_frame(self, n: int = 1) -> int:
        """Advance playback by ``n`` frames (wrapping); returns the new index."""
        self.set_frame(self.frame_index + n)
        return self.frame_index

    def _load_motion(self, frames: np.ndarray, fps: float, source: str) -> None:
        with self._lock:
            self.frames = np.asarray(frames, np.float32)
            self.fps = float(fps)
            self.motion_source = source
        self._notify("frames")
        self.set_frame(0)

    # ------------------------------------------------------------------ joints (articulated inputs)
    def joint_limits(self) -> dict[str, tuple[float, float]]:
        """Slider range per movable joint (continuous joints: one turn each way)."""
        obj = self.drawable.articulated
        if obj is None:
            return {}
        return {j.name: (j.limits if j.limits is not None else (-np.pi, np.pi)) for j in obj.movable_joints}

    def set_joint(self, name: str, value: float) -> None:
        """Pose the articulated object with joint ``name`` at ``value`` (rad or m), clamped to its limits."""
        obj = self.drawable.articulated
        if obj is None:
            raise ConfigError("this input has no joints")
        limits = self.joint_limits()
        if name not in limits:
            raise ConfigError(f"no movable joint named {name!r}; joints: {', '.join(limits)}")
        lo, hi = limits[name]
        with self._lock:
            self.joint_values[name] = float(np.clip(value, lo, hi))
            v, _, _ = obj.merged(self.joint_values)
            self.vertices = v.astype(np.float32)
            self.axes = joint_axes_at(obj, self.joint_values)
        self._notify("mesh")

    # ------------------------------------------------------------------ kinematic model
    def load_model(self) -> bool:
        """Load the kinematic model, bind it to the rest mesh and fit the active subspace.

        Never raises: on failure ``model_status`` says why and the model controls stay disabled.
        """
        cfg = self.config
        self.model_status = "loading kinematic model ..."
        self._notify("model")
        try:
            import torch

            from kinemesh.articulation.probes import motion_probes
            from kinemesh.geometry.kind import resolve_kind
            from kinemesh.reduce import ReductionConfig, bind

            torch.set_num_threads(1)
            t0 = time.perf_counter()
            kind = resolve_kind(self._requested_kind(), self.rest_vertices, self.faces, self.part_ids)
            probes = self._articulation = self._part_names = None
            self._limit_stops = False
            if cfg.basis != "prior" and kind == "articulated" and self.part_ids is not None:  # URDF's / predicted
                obj = self.drawable.articulated
                names = [p.name for p in obj.parts] if obj is not None else \
                    [f"part_{i}" for i in range(int(np.max(self.part_ids)) + 1)]
                probes, source, self._articulation = motion_probes(self.rest_vertices, self.faces,
                                                                   self.part_ids, names, obj)
                self._limit_stops = source == "given"  # a URDF's limits are the object's own
                self._part_names = names
            b = bind(self.rest_vertices, self.faces, cfg.checkpoint, kind=kind,
                     part_ids=self.part_ids, n_points=cfg.n_points, device=cfg.device, probes=probes,
                     reduction=ReductionConfig(k_q=None, max_k=cfg.max_q, n_samples=cfg.subspace_samples,
                                               basis=cfg.basis))
            self.attach_decoder(b.decoder, notify=False, kind=b.kind)
            rms = self.fit_rest(notify=False)
            sub = b.subspace
            self.model_status = (
                f"{cfg.checkpoint or 'default checkpoint'}: {sub.k} reduced coordinates of latent dim "
                f"{sub.latent_dim} ({100 * sub.explained:.1f}% of the active-subspace trace); "
                f"rest fit {1000 * rms:.1f} mm RMS; "
                f"{self._session.info['kind']} dynamics; ready in {time.perf_counter() - t0:.1f} s"
            )
            if not b.model.info.get("trained", True):
                self.model_status = "UNTRAINED checkpoint: deformations are arbitrary. " + self.model_status
        except Exception as exc:  # noqa: BLE001 - any failure must degrade to a message, not kill the GUI
            self.model_ok = False
            self.model_status = f"kinematic model unavailable: {exc}"
            if isinstance(exc, (KinemeshError, ImportError, OSError)):
                log.warning(self.model_status)
            else:
                log.exception(self.model_status)
        self._notify("model")
        return self.model_ok

    def attach_decoder(self, reduced, status: str | None = None, notify: bool = True, kind: str | None = None) -> None:
        """Use ``reduced`` (q (..., k) -> ``vertices`` (..., N, 3) / ``points`` (..., P, 3), with ``mu_cond``
        (k,), ``rest_points`` and ``rest_vertices``; e.g. a ``kinemesh.reduce.ReducedDecoder``) as the
        kinematic model; ``kind`` is the object kind it was bound as (None: from the config and the mesh).
        q starts at 0 (the prior mean) until :meth:`fit_rest` finds the rest state."""
        k = int(reduced.mu_cond.shape[-1])
        with self._lock:
            self.reduced, self.kind = reduced, kind
            self.q = np.zeros(k)
            self.q_rest = np.zeros(k)
            self.rest_offset = np.zeros_like(self.rest_vertices)
            self.model_ok = True
            self._session = None
        if status is not None:
            self.model_status = status
        if notify:
            self._notify("model")

    def _requested_kind(self) -> str:
        """The kind of the config; "auto" on an articulated input (URDF, PartNet) is articulated."""
        auto = self.config.kind == "auto"
        return "articulated" if auto and self.drawable.articulated is not None else self.config.kind

    def dynamics_kind(self) -> str:
        """The object kind the dynamics use: the bound one, else the config's resolved on the rest mesh."""
        from kinemesh.geometry.kind import resolve_kind

        if self.kind is not None and self.config.kind in ("auto", self.kind):
            return self.kind
        return resolve_kind(self._requested_kind(), self.rest_vertices, self.faces, self.part_ids)

    def fit_rest(self, notify: bool = True) -> float:
        """Start the dynamics session (:class:`kinemesh.dynamics.session.Session`: per-kind mass, stiffness,
        damping, barrier, and the rest state q_rest whose decoded shape best matches the input mesh) and show
        q = q_rest. The residual (input minus decoded rest, per vertex) is added to every decoded pose so the
        mesh starts exactly as loaded (the model supplies the motion). Returns the rest-fit RMS (m).
        """
        self._require_model()
        with self._lock:
            self._session = None
            self._start_session()
            self.q = self.q_rest.copy()
            self.vertices = self._decode(self.q)
        if notify:
            self._notify("mesh")
        return float(self._session.info.get("rest_fit_rms_m", 0.0))

    def _require_model(self) -> None:
        if not self.model_ok or self.reduced is None:
            raise ConfigError(f"no kinematic model: {self.model_status}")

    def _decode(self, q: np.ndarray) -> np.ndarray:
        return self._start_session().vertices(q)

    def set_q(self, index: int, value: float) -> None:
        """Set reduced coordinate ``index`` to ``value`` (prior standard deviations) and decode the mesh."""
        self._require_model()
        if not 0 <= index < len(self.q):
            raise ConfigError(f"q index {index} out of range 0..{len(self.q) - 1}")
        with self._lock:
            q = self.q.copy()
            q[index] = float(np.clip(value, -self.config.q_range, self.config.q_range))
            self.set_q_vector(q)

    def set_q_vector(self, q) -> None:
        """Set all reduced coordinates (k,) and decode the mesh."""
        self._require_model()
        q = np.asarray(q, np.float64).reshape(-1)
        if q.shape != self.q.shape or not np.isfinite(q).all():
            raise ConfigError(f"q must be {self.q.shape[0]} finite numbers")
        with self._lock:
            self.q = q
            self.vertices = self._decode(q)
        self._notify("mesh")

    # ------------------------------------------------------------------ pick, drag, let go
    def pick(self, ray_origin, ray_direction) -> int | None:
        """Select the vertex nearest to where a ray (e.g. a mouse click) first hits the displayed mesh."""
        hit = ray_mesh_pick(self.vertices, self.faces, ray_origin, ray_direction)
        if hit is None:
            return None
        self.select_vertex(hit[0])
        return hit[0]

    def select_vertex(self, vertex_id: int) -> None:
        """Select mesh vertex ``vertex_id`` as the drag handle."""
        n = self.vertices.shape[0]
        if not 0 <= int(vertex_id) < n:
            raise ConfigError(f"vertex id {vertex_id} out of range 0..{n - 1}")
        with self._lock:
            self.selected_vertex = int(vertex_id)
            self._drag_hist = []
            self.drag_target = self.vertices[self.selected_vertex].astype(np.float64).copy()
        self._set_status(f"selected vertex {vertex_id}; drag the gizmo, then let go to run the dynamics")

    def _start_session(self):
        """The dynamics Session for the current options (cached; rebuilt after an option changes); also sets
        ``q_rest`` and ``rest_offset``."""
        from kinemesh.dynamics.scene import SimulationSpec
        from kinemesh.dynamics.session import Session

        cfg = self.config
        if self._session is None:
            # no rigid-body coordinates here: the sliders are the model's q, and a poked free body drifting
            # out of the view without a floor is not what the drag-and-release tool is for
            spec = SimulationSpec(kind=self.dynamics_kind(), gravity=cfg.gravity, stiffness=cfg.stiffness_hz,
                                  damping=cfg.damping, rigid=False, fixed_base=cfg.fixed_base,
                                  limit_stops=self._limit_stops)
            self._session = Session(self.reduced, self.rest_vertices, self.faces, spec,
                                    articulation=self._articulation, part_names=self._part_names)
            self.q_rest, self.rest_offset = self._session.q_rest, self._session.rest_offset
            self.q = self.q if self.q is not None else self.q_rest.copy()
        return self._session

    def drag_to(self, target, iters: int = 4) -> float:
        """Move the selected vertex towards ``target`` (3,) metres: solve q so the vertex reaches it
        (plausible states only, ``iters`` Levenberg-Marquardt steps warm-started from the current q)
        and show that pose. Returns the remaining distance (m)."""
        self._require_model()
        if self.selected_vertex is None:
            raise ConfigError("pick a vertex first")
        target = np.asarray(target, np.float64).reshape(3)
        with self._lock:
            self.q, rms = self._start_session().drag(self.selected_vertex, target, self.q, iters=iters)
            self.drag_target = target
            self._drag_hist = (self._drag_hist + [(time.perf_counter(), self.q.copy())])[-8:]
            self.vertices = self._decode(self.q)
        self._notify("mesh")
        return rms

    def release_velocity(self, window: float = 0.5) -> np.ndarray:
        """qd (k,) of a flick: the average rate of change of q over the drag solves of the last ``window``
        seconds (zero for a slow or no drag), its norm capped at 2 prior standard deviations per second so
        a flick stays within the plausible region."""
        hist = [(t, q) for t, q in self._drag_hist if time.perf_counter() - t < window]
        if len(hist) < 2 or self.q is None:
            return np.zeros(0 if self.q is None else len(self.q))
        (t0, q0), (t1, q1) = hist[0], hist[-1]
        qd = (q1 - q0) / max(t1 - t0, 1e-3)
        norm = float(np.linalg.norm(qd))
        return qd * (2.0 / norm) if norm > 2.0 else qd

    def release(self, seconds: float | None = None, flick: bool = True) -> np.ndarray:
        """See :meth:`_release`; if a flick makes the simulation diverge, it is retried from rest velocity."""
        from kinemesh.errors import SimulationDivergedError

        if flick and len(self._drag_hist) >= 2:
            q_before, hist = None if self.q is None else self.q.copy(), list(self._drag_hist)
            try:
                return self._release(seconds, flick=True)
            except SimulationDivergedError as exc:
                log.warning("flick release diverged (%s); retrying from rest velocity", exc)
                self.q, self._drag_hist = q_before, hist
        frames = self._release(seconds, flick=False)
        return frames

    def _release(self, seconds: float | None = None, flick: bool = True) -> np.ndarray:
        """Let go: simulate the latent dynamics from the current q, load the motion for playback and return
        its frames (T, N, 3). The initial velocity is zero, or with ``flick`` the drag's recent velocity
        (:meth:`release_velocity`), so a quick drag throws a free hinge while a slow one leaves it in place.

        The system is integrated at ``config.sim_fps`` and q is interpolated to ``config.play_fps``
        for playback. Raises SimulationDivergedError if it cannot be made stable.
        """
        self._require_model()
        cfg = self.config
        secs = float(seconds if seconds is not None else cfg.sim_seconds)
        if not secs > 0:
            raise ConfigError(f"simulated duration must be positive, got {secs}")
        n = max(int(round(secs * cfg.sim_fps)) + 1, 2)
        self._set_status(f"simulating {secs:g} s of latent dynamics ({n} frames) ...")
        t0 = time.perf_counter()
        with self._lock:
            session = self._start_session()
            qd0 = self.release_velocity() if flick else np.zeros(len(self.q))
            self._drag_hist = []
            q_list, warnings = [self.q.copy()], []
            # a few frames at a time: show the newest pose while the rest is computed
            for q_new, warn in session.rollout(self.q, qd0, n, cfg.sim_fps, cfg.substeps, cfg.integrator):
                q_list += list(q_new)
                warnings += warn
                self.q = q_new[-1]
                self.vertices = self._decode(self.q)
                self._notify("mesh")
                self.status = f"simulating: {(len(q_list) - 1) / cfg.sim_fps:.1f} of {secs:g} s"
                self._notify("status")
            q_sim = np.stack(q_list)
            t_sim = np.arange(n) / cfg.sim_fps
            t_play = np.arange(int(np.floor(t_sim[-1] * cfg.play_fps)) + 1) / cfg.play_fps
            qs = np.stack([np.interp(t_play, t_sim, q_sim[:, j]) for j in range(q_sim.shape[1])], axis=1)
            frames = session.vertices(qs, rest_offset=False)
            self.last_rollout = q_sim
            self._play_q = qs
        self._load_motion(frames, cfg.play_fps, "dynamics")
        note = f" ({len(warnings)} step reductions for stability)" if warnings else ""
        self._set_status(f"simulated {secs:g} s in {time.perf_counter() - t0:.1f} s{note}; playing")
        return frames

    def show_q_frame(self, index: int) -> None:
        """After a simulation, keep q in sync with the displayed frame (so sliders follow the motion)."""
        if self._play_q is not None and self.motion_source == "dynamics":
            self.q = np.asarray(self._play_q[index % len(self._play_q)], np.float64)

    # ------------------------------------------------------------------ export
    def current_sequence(self):
        """The loaded motion as a KinematicSequence (one frame if nothing moves)."""
        from kinemesh.data.sequence import KinematicSequence

        frames = self.frames if self.n_frames > 1 else self.vertices[None]
        meta = {"category": "unknown", "kind": "mixed", "source": f"kinemesh view ({self.motion_source})"}
        seq = self.drawable.sequence
        if seq is not None:
            meta.update({k: seq.meta[k] for k in ("category", "kind") if k in seq.meta})
        elif self.drawable.articulated is not None:
            meta.update({"category": self.drawable.articulated.category, "kind": "articulated"})
        return KinematicSequence(
            rest_vertices=self.rest_vertices,
            faces=self.faces,
            frames=frames,
            times=np.arange(len(frames)) / self.fps,
            part_ids=self.part_ids,
            meta=meta,
        )

    def export(self, path: str | os.PathLike, size: tuple[int, int] = (480, 360)) -> Path:
        """Write the loaded motion to ``path``: .glb (animated, morph targets), .npz (KinematicSequence) or
        .mp4/.gif (rendered). Raises ConfigError for other extensions."""
        path = Path(path)
        ext = path.suffix.lower()
        seq = self.current_sequence()
        if ext == ".glb":
            from kinemesh.data.exporters import export_glb

            return export_glb(seq, path)
        if ext == ".npz":
            return seq.save(path)
        if ext in (".mp4", ".gif"):
            from kinemesh.viz.render import render_frames

            return render_frames(seq.frames, seq.faces, path, fps=self.fps, part_ids=self.part_ids,
                                 size=size, progress=False)
        raise ConfigError(f"{path}: export as .glb, .npz, .mp4 or .gif")


def _face_groups(faces: np.ndarray, part_ids: np.ndarray | None):
    """Split faces by the part of their first vertex: list of (part id, vertex ids (n_i,), local faces)."""
    if part_ids is None:
        vids = np.unique(faces)
        return [(0, vids, np.searchsorted(vids, faces))]
    pid = np.asarray(part_ids).reshape(-1)
    fp = pid[faces[:, 0]]
    groups = []
    for p in np.unique(fp):
        f = faces[fp == p]
        vids = np.unique(f)
        groups.append((int(p), vids, np.searchsorted(vids, f)))
    return groups


def _has_sharp_creases(vertices: np.ndarray, faces: np.ndarray, angle_deg: float = 40.0) -> bool:
    """True when more than 5 % of the interior edges fold by more than ``angle_deg`` (boxy, CAD-like
    meshes): such meshes look right with flat shading, smooth ones with interpolated normals."""
    try:
        import trimesh

        m = trimesh.Trimesh(vertices, faces, process=False)
        ang = m.face_adjacency_angles
    except Exception:  # degenerate input: smooth shading is the safe default
        return False
    return bool(ang.size and (ang > np.radians(angle_deg)).mean() > 0.05)


class ViewerGUI:
    """The browser front-end of a :class:`ViewerApp` (viser). ``start()`` serves it; ``url`` says where."""

    def __init__(
        self, app: ViewerApp, host: str = "127.0.0.1", port: int = 8080, load_model_async: bool = True
    ):
        try:
            import viser
        except ImportError as exc:  # pragma: no cover - viser is a pinned extra
            from kinemesh.errors import MissingDependencyError

            raise MissingDependencyError("viser", "kinemesh view", extra="viewer") from exc
        self.app = app
        self.server = viser.ViserServer(host=host, port=port, verbose=False)
        self.host, self.port = host, self.server.get_port()
        self._playing = False
        self._stop = threading.Event()
        self._q_sliders: list = []
        self._joint_sliders: dict = {}
        self._syncing = False
        self._drag_latest = None
        self._drag_busy = False
        self._drag_release = False
        self._build_scene()
        self._build_gui()
        app.add_listener(self._on_app_change)
        self._player = threading.Thread(target=self._play_loop, name="kinemesh-view-player", daemon=True)
        self._player.start()
        if app.model_ok:
            self._add_q_sliders()
        elif load_model_async:
            threading.Thread(target=app.load_model, name="kinemesh-view-model", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # ------------------------------------------------------------------ scene
    def _build_scene(self) -> None:
        app, scene = self.app, self.server.scene
        scene.set_up_direction("+z")
        allv = app.frames.reshape(-1, 3)
        lo, hi = allv.min(0), allv.max(0)
        center = 0.5 * (lo + hi)
        size = float(np.linalg.norm(hi - lo)) or 1.0
        self.size = size
        scene.add_grid("/floor", width=3 * size, height=3 * size, cell_size=size / 8, section_size=size / 2,
                       position=(float(center[0]), float(center[1]), float(lo[2]) - 1e-3 * size))
        cam = self.server.initial_camera
        cam.look_at = tuple(float(c) for c in center)
        cam.position = tuple(float(c) for c in center + size * np.array([0.55, -0.8, 0.45]))
        cam.up = (0.0, 0.0, 1.0)
        self._groups = _face_groups(app.faces, app.part_ids)
        flat = _has_sharp_creases(app.vertices, app.faces)
        self._meshes = []
        for i, (pid, vids, f) in enumerate(self._groups):
            color = tuple(int(255 * 0.8 * c) for c in PALETTE[i % len(PALETTE)])  # viser lights brightly
            h = scene.add_mesh_simple(f"/object/part{i}", app.vertices[vids], f, color=color, side="double",
                                      flat_shading=flat)
            self._meshes.append(h)
        # Scene-level clicks carry the mouse ray; picking is done here (ray_mesh_pick) on the current mesh.
        scene.on_click()(self._on_mesh_click)
        self._arrows = None
        self._update_arrows()
        self._marker = scene.add_icosphere(
            "/pick/marker", radius=0.015 * size, color=(230, 30, 30), visible=False
        )
        self._gizmo = None

    def _update_arrows(self) -> None:
        app = self.app
        if not app.axes:
            if self._arrows is not None:
                self._arrows.visible = False
            return
        L = 0.4 * self.size
        pts = np.stack([np.stack([o - 0.35 * L * d, o + L * d]) for o, d in app.axes]).astype(np.float32)
        colors = np.array([[217, 26, 26], [26, 89, 230], [13, 166, 51], [204, 115, 0]], np.uint8)
        colors = colors[np.arange(len(pts)) % len(colors)]
        if self._arrows is None or len(self._arrows.points) != len(pts):
            if self._arrows is not None:
                self._arrows.remove()
            self._arrows = self.server.scene.add_arrows(
                "/axes", pts, colors, shaft_radius=0.008 * self.size, head_radius=0.02 * self.size,
                head_length=0.05 * self.size)
        else:
            self._arrows.points = pts
            self._arrows.visible = True

    def _push_mesh(self) -> None:
        v = self.app.vertices
        for h, (_, vids, _) in zip(self._meshes, self._groups):
            h.vertices = v[vids]
        self._update_arrows()
        if self.app.selected_vertex is not None:
            self._marker.position = tuple(float(c) for c in v[self.app.selected_vertex])

    # ------------------------------------------------------------------ GUI
    def _build_gui(self) -> None:
        app, gui = self.app, self.server.gui
        d = app.drawable
        gui.add_markdown(
            f"**kinemesh view** - {d.title or 'object'}  \n{app.vertices.shape[0]} vertices, "
            f"{len(app.faces)} faces, {app.n_frames} frame(s)"
        )
        self._status = gui.add_markdown("ready")
        if app.n_frames > 1:
            with gui.add_folder("Playback"):
                self._play = gui.add_checkbox("Play", initial_value=False)
                self._play.on_update(lambda _: self._set_playing(self._play.value))
                self._frame = gui.add_slider("Frame", min=0, max=app.n_frames - 1, step=1, initial_value=0)
                self._frame.on_update(self._on_frame_slider)
        else:
            self._play = self._frame = None
        if app.drawable.articulated is not None and app.joint_limits():
            with gui.add_folder("Joints"):
                for name, (lo, hi) in app.joint_limits().items():
                    s = gui.add_slider(name, min=float(lo), max=float(hi), step=float(hi - lo) / 200 or 0.01,
                                       initial_value=float(np.clip(0.0, lo, hi)))
                    s.on_update(lambda ev, n=name: self._guard(lambda: app.set_joint(n, ev.target.value)))
                    self._joint_sliders[name] = s
        self._model_folder = gui.add_folder("Kinematic model (reduced coordinates q)")
        with self._model_folder:
            self._model_md = gui.add_markdown(app.model_status)
        with gui.add_folder("Drag and let go"):
            gui.add_markdown(
                "Click the object to pick a vertex, drag the gizmo; releasing it runs the latent "
                "dynamics and plays the motion."
            )
            self._gravity = gui.add_checkbox("Gravity", initial_value=app.config.gravity)
            self._gravity.on_update(lambda _: self._set_dyn(gravity=self._gravity.value))
            self._stiff = gui.add_slider(
                "Stiffness (Hz)", min=0.0, max=5.0, step=0.1, initial_value=self._default_stiffness()
            )
            self._stiff.on_update(lambda _: self._set_dyn(stiffness_hz=self._stiff.value))
            b = gui.add_button("Let go / run dynamics")
            b.on_click(lambda _: self._run_async(self._release_and_play))
            r = gui.add_button("Reset to rest")
            r.on_click(lambda _: self._reset())
        with gui.add_folder("Export"):
            for ext, label in ((".glb", "Download GLB"), (".mp4", "Download MP4"), (".npz", "Download NPZ")):
                btn = gui.add_button(label)
                btn.on_click(lambda ev, e=ext: self._run_async(lambda: self._download(ev.client, e)))

    def _add_q_sliders(self) -> None:
        app = self.app
        if self._q_sliders or not app.model_ok:
            return
        r = float(app.config.q_range)
        with self._model_folder:
            for i in range(len(app.q)):
                s = self.server.gui.add_slider(f"q{i + 1}", min=-r, max=r, step=0.05, initial_value=0.0)
                s.on_update(lambda ev, i=i: self._on_q_slider(i, ev.target.value))
                self._q_sliders.append(s)
        self._sync_q_sliders()

    def _on_q_slider(self, index: int, value: float) -> None:
        if not self._syncing:  # programmatic slider updates (playback, drags) must not feed back
            self._guard(lambda: self.app.set_q(index, value))

    def _default_stiffness(self) -> float:
        """The per-kind default stiffness (Hz) of ``kinemesh.dynamics.scene``."""
        app = self.app
        if app.config.stiffness_hz is not None:
            return float(app.config.stiffness_hz)
        try:
            from kinemesh.dynamics.scene import KIND_DEFAULTS

            return float(KIND_DEFAULTS[app.dynamics_kind()]["stiffness"])
        except Exception:  # noqa: BLE001 - only a slider default
            return 1.0

    def _set_dyn(self, **kw) -> None:
        """Change a dynamics option; the system is rebuilt on the next drag or release."""
        for k, v in kw.items():
            setattr(self.app.config, k, v)
        with self.app._lock:
            self.app._session = None

    def _reset(self) -> None:
        app = self.app
        self._set_playing(False)
        if app.model_ok:
            app.set_q_vector(app.q_rest if app.q_rest is not None else np.zeros_like(app.q))
            self._sync_q_sliders()
        if app.drawable.articulated is not None:
            for n, s in self._joint_sliders.items():
                s.value = 0.0
        app._load_motion(app.drawable.frames, app.drawable.fps or 30.0, "input")

    def _guard(self, fn) -> None:
        """Run a callback; errors go to the status line (and the log) instead of killing the GUI thread."""
        try:
            fn()
        except KinemeshError as exc:
            self.app._set_status(f"error: {exc}")
        except Exception as exc:  # noqa: BLE001 - a failing action must not take the viewer down
            log.exception("viewer action failed")
            self.app._set_status(f"error: {type(exc).__name__}: {exc}")

    def _run_async(self, fn) -> None:
        threading.Thread(target=self._guard, args=(fn,), daemon=True).start()

    def _download(self, client, ext: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = self.app.export(Path(tmp) / f"kinemesh_motion{ext}")
            data = path.read_bytes()
        client.send_file_download(path.name, data)
        self.app._set_status(f"exported {path.name} ({len(data) / 1e3:.0f} kB)")

    # ------------------------------------------------------------------ events
    def _on_mesh_click(self, event) -> None:
        app = self.app
        vid = app.pick(event.ray_origin, event.ray_direction)
        if vid is None:
            return
        self._push_mesh()
        self._marker.visible = True
        pos = tuple(float(c) for c in app.vertices[vid])
        if self._gizmo is None:
            self._gizmo = self.server.scene.add_transform_controls(
                "/pick/gizmo", scale=0.25 * self.size, disable_rotations=True, position=pos)
            self._gizmo.on_update(self._on_gizmo)
        else:
            self._gizmo.position = pos
            self._gizmo.visible = True

    def _on_gizmo(self, event) -> None:
        """Gizmo drag: solve q for the latest target in a worker (skipping stale targets); on release, a
        final solve and the dynamics."""
        app = self.app
        if not app.model_ok:
            app._set_status(f"cannot drag: {app.model_status}")
            return
        phase = getattr(event, "phase", "update")
        if phase == "start":
            self._set_playing(False)
            return
        self._drag_latest = np.asarray(event.target.position, np.float64)
        if phase == "end":
            self._drag_release = True
        if not self._drag_busy:
            self._drag_busy = True
            threading.Thread(target=self._drag_worker, daemon=True).start()

    def _drag_worker(self) -> None:
        app = self.app
        try:
            while True:
                target, self._drag_latest = self._drag_latest, None
                if target is None:
                    break
                final = self._drag_release
                self._guard(lambda: app.drag_to(target, iters=12 if final else 3))
                self._sync_q_sliders()
            if self._drag_release:
                self._drag_release = False
                self._guard(app.release)
                self._set_playing(True)
        finally:
            self._drag_busy = False

    def _release_and_play(self) -> None:
        if not self.app.model_ok:
            raise ConfigError(f"no kinematic model: {self.app.model_status}")
        self.app.release()
        self._set_playing(True)

    def _on_frame_slider(self, _event) -> None:
        if not self._syncing:
            self.app.set_frame(int(self._frame.value))

    def _on_app_change(self, what: str) -> None:
        app = self.app
        if what == "mesh":
            self._push_mesh()
        elif what == "frames":
            if self._frame is None and app.n_frames > 1:
                with self.server.gui.add_folder("Playback"):
                    self._play = self.server.gui.add_checkbox("Play", initial_value=False)
                    self._play.on_update(lambda _: self._set_playing(self._play.value))
                    self._frame = self.server.gui.add_slider("Frame", min=0, max=app.n_frames - 1, step=1,
                                                             initial_value=0)
                    self._frame.on_update(self._on_frame_slider)
            elif self._frame is not None:
                self._frame.max = max(app.n_frames - 1, 1)
        elif what == "model":
            self._model_md.content = app.model_status
            if app.model_ok:
                self._add_q_sliders()
        elif what == "status":
            self._status.content = app.status

    def _sync_q_sliders(self) -> None:
        app = self.app
        if not self._q_sliders or app.q is None:
            return
        self._syncing = True
        try:
            for s, v in zip(self._q_sliders, app.q):
                s.value = float(np.clip(v, s.min, s.max))
        finally:
            self._syncing = False

    def _set_playing(self, on: bool) -> None:
        self._playing = bool(on)
        if self._play is not None and self._play.value != self._playing:
            self._play.value = self._playing

    def _play_loop(self) -> None:
        while not self._stop.is_set():
            app = self.app
            if self._playing and app.n_frames > 1:
                i = app.step_frame()
                app.show_q_frame(i)
                if self._frame is not None:
                    self._syncing = True
                    try:
                        self._frame.value = i
                    finally:
                        self._syncing = False
                self._sync_q_sliders()
                self._stop.wait(1.0 / max(app.fps, 1.0))
            else:
                self._stop.wait(0.05)

    def stop(self) -> None:
        """Stop playback and the server."""
        self._stop.set()
        self.server.stop()
