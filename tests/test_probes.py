"""Motion probes (kinemesh.geometry.probes, kinemesh.articulation.probes) and the subspace they span
(kinemesh.reduce.active_subspace.fit_probes), plus the part handling that goes with them: fixed links move with
their parent, and a soft body made of several components is not made rigid per component."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.toys import box, moving_model, subdivide


def _edge_lengths(v, f):
    e = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
    return np.linalg.norm(v[e[:, 0]] - v[e[:, 1]], axis=1)


def test_elastic_probes_squash_bend_twist_dent():
    from kinemesh.geometry.probes import elastic_probes

    v, f = subdivide(*box([0, 0, 0], [2.0, 1.0, 0.5]), 2)
    P = elastic_probes(v, amplitude=0.25)
    assert P.shape[1:] == v.shape and len(P) >= 20 and np.isfinite(P).all()
    vol = lambda x: abs(np.einsum("ij,ij->i", x[f[:, 0]], np.cross(x[f[:, 1]], x[f[:, 2]])).sum()) / 6  # noqa: E731
    # the first six are volume-preserving squashes / stretches of 25 % along each principal axis
    for p in P[:6]:
        assert vol(p) == pytest.approx(vol(v), rel=1e-6)
        strain = np.abs(_edge_lengths(p, f) / _edge_lengths(v, f) - 1).max()
        assert strain == pytest.approx(0.25, abs=0.02)
    # every probe moves the body, none translates it away
    disp = np.linalg.norm(P - v, axis=2).mean(1)
    assert (disp > 1e-3).all() and (np.linalg.norm(P.mean(1) - v.mean(0), axis=1) < 0.5).all()


def test_cloth_probes_are_folds_and_hangs_of_the_sheet():
    from kinemesh.geometry.probes import cloth_probes

    x, y = np.meshgrid(np.linspace(0, 1, 11), np.linspace(0, 1, 11), indexing="ij")
    v = np.stack([x.ravel(), y.ravel(), np.zeros(x.size)], 1)
    i = np.arange(121).reshape(11, 11)
    f = np.concatenate([np.stack([i[:-1, :-1].ravel(), i[1:, :-1].ravel(), i[1:, 1:].ravel()], 1),
                        np.stack([i[:-1, :-1].ravel(), i[1:, 1:].ravel(), i[:-1, 1:].ravel()], 1)])
    P = cloth_probes(v)
    assert P.shape[1:] == v.shape and np.isfinite(P).all()
    folds = P[:-2]  # every probe but the two sags turns part of the sheet about a line: lengths are kept
    for p in folds:  # (but for the edges that cross the fold line)
        change = np.abs(_edge_lengths(p, f) / _edge_lengths(v, f) - 1)
        assert (change > 1e-9).mean() < 0.15 and change.max() < 0.3
    # the whole sheet hanging from one edge (90 deg): some vertex is a full length below the sheet
    assert (v[:, 2].min() - P[..., 2].min(1)).max() == pytest.approx(1.0, abs=1e-6)
    assert (P[-2:, :, 2] <= 1e-12).all() and (P[-2:, :, 2].min(1) < -0.1).all()  # sags go down


def _hinged(with_handle: bool = True):
    from kinemesh.data.articulated import ArticulatedObject, Joint, Part

    bv, bf = box([0, 0, 0], [1, 1, 1])
    dv, df = box([-0.05, 0, 0], [0, 1, 1])
    hv, hf = box([-0.1, 0.8, 0.4], [-0.05, 0.85, 0.6])
    parts = [Part("body", bv, bf), Part("door", dv, df)] + ([Part("handle", hv, hf)] if with_handle else [])
    joints = [Joint("hinge", "revolute", "body", "door", (0, 0, 1), (0, 0, 0), (0.0, 1.5))]
    if with_handle:
        joints.append(Joint("weld", "fixed", "door", "handle", (0, 0, 1), (0, 0, 0)))
    return ArticulatedObject(parts, joints, name="hinged")


def test_fixed_links_move_with_their_parent_part():
    from kinemesh.geometry.segments import segmented_object

    obj = _hinged()
    wm = segmented_object(obj, None)
    assert wm.part_names == ["body", "door"]
    v = np.asarray(wm.mesh.vertices)
    on_handle = (v[:, 1] > 0.79) & (v[:, 1] < 0.86)
    assert on_handle.sum() == 8 and (wm.part_ids[on_handle] == 1).all() and (wm.part_ids[v[:, 0] > 0.5] == 0).all()


def test_articulated_probes_turn_the_child_subtree_about_its_joint():
    from kinemesh.geometry.probes import articulated_probes
    from kinemesh.geometry.segments import segmented_object

    obj = _hinged()
    wm = segmented_object(obj, None)
    v, pid = np.asarray(wm.mesh.vertices), wm.part_ids
    P = articulated_probes(v, pid, wm.part_names, obj, n_values=3, n_mixed=2)
    assert len(P) == 3 + 2  # limits (0, 1.5): only the positive end, 3 values, then 2 mixed poses
    body, door = pid == 0, pid == 1
    assert np.allclose(P[:, body], v[body])  # the root never moves
    for p, angle in zip(P[:3], (0.5, 1.0, 1.5)):
        R = obj.joints[0].motion(angle)
        assert np.allclose(p[door], v[door] @ R[:3, :3].T + R[:3, 3])  # door and its handle turn together
    with pytest.raises(Exception, match="no movable joint"):
        from kinemesh.data.articulated import ArticulatedObject, Part

        articulated_probes(v, pid, wm.part_names, ArticulatedObject([Part("body", v, wm.mesh.faces)], []))


class LinearEncoderDecoder:
    """x(z) = rest + A z with a left-inverse encoder: the posterior of x is exactly pinv(A) (x - rest)."""

    def __init__(self, rest: np.ndarray, D: int = 6, seed: int = 0):
        g = np.random.default_rng(seed)
        self.rest_vertices = torch.as_tensor(rest)
        self.rest_points = self.rest_vertices
        self.A = torch.as_tensor(g.normal(size=(rest.size, D)))
        self.mu_cond = torch.zeros(D, dtype=torch.float64)
        self.prior_factor = torch.as_tensor(np.diag(g.uniform(0.5, 2.0, D)))

    def points(self, z):
        return self.rest_vertices + (z @ self.A.T).reshape(*z.shape[:-1], -1, 3)

    vertices = points

    def encode(self, x):
        d = torch.as_tensor(np.asarray(x) - self.rest_vertices.numpy()).reshape(-1)
        return torch.linalg.lstsq(self.A, d[:, None]).solution[:, 0], None


def test_fit_probes_spans_the_probe_motions_with_unit_spread(tmp_path):
    from kinemesh.reduce.active_subspace import ReducedDecoder, Subspace, fit_probes

    rest = np.random.default_rng(1).normal(size=(20, 3))
    dec = LinearEncoderDecoder(rest)
    g = np.random.default_rng(2)
    # probes made by two latent directions only: the subspace must reproduce them exactly with k = 2
    dirs = torch.as_tensor(g.normal(size=(2, 6)))
    coef = torch.as_tensor(g.normal(size=(12, 2)) * [3.0, 0.5])
    probes = dec.vertices(coef @ dirs).numpy()
    sub = fit_probes(dec, probes, k_q=2)
    red = ReducedDecoder(dec, sub)
    q = sub.q(coef @ dirs)
    assert torch.allclose(red.vertices(q), torch.as_tensor(probes), atol=1e-4)
    assert torch.allclose((q ** 2).mean(0), torch.ones(2, dtype=q.dtype), atol=1e-4)  # unit RMS spread
    assert sub.explained == pytest.approx(1.0, abs=1e-6)
    back = Subspace.load(sub.save(tmp_path / "s"))
    assert torch.allclose(back.scale, sub.scale) and torch.allclose(back.basis, sub.basis)
    # k_q None: the probes' 99 % (the first direction: spread 3 against 0.5), raised to min_k, never above the
    # latent dimension (6)
    assert fit_probes(dec, probes, k_q=None).k == 1
    assert fit_probes(dec, probes, k_q=None, min_k=4).k == 4
    assert fit_probes(dec, probes, k_q=None, min_k=9).k == 6
    with pytest.raises(Exception, match="motion probes must be"):
        fit_probes(dec, probes[:, :5], k_q=2)


def test_bind_uses_probes_and_soft_components_are_not_rigid():
    """elastic binding: probes from the geometry by default, and a body of two components gets per-point
    skinning (it can squash), while an articulated binding keeps each component rigid."""
    from kinemesh.reduce import ReductionConfig, bind

    a, fa = subdivide(*box([0, 0, 0], [1, 1, 1]), 1)
    b, fb = subdivide(*box([1.2, 0, 0], [1.6, 0.4, 0.4]), 1)
    v, f = np.concatenate([a, b]), np.concatenate([fa, fb + len(a)])
    pid = np.repeat([0, 1], [len(a), len(b)])
    model = moving_model()
    soft = bind(v, f, model, kind="elastic", part_ids=pid, n_points=64,
                reduction=ReductionConfig(k_q=3, basis="probes"))
    assert soft.subspace.method == "probes" and soft.subspace.scale is not None
    assert bind(v, f, model, kind="elastic", part_ids=pid, n_points=64,
                reduction=ReductionConfig(k_q=3)).subspace.method == "jacobian"  # auto: the prior for elastic bodies
    cloth = bind(v, f, model, kind="cloth", part_ids=pid, n_points=64, reduction=ReductionConfig(k_q=4))
    assert cloth.subspace.method == "probes" and torch.equal(cloth.subspace.scale[2:], torch.ones(2))  # 2 prior dims
    W = cloth.subspace.W.double()
    assert torch.allclose(W.T @ W, torch.eye(4, dtype=torch.float64), atol=1e-5)  # one orthonormal basis
    hard = bind(v, f, model, kind="articulated", part_ids=pid, n_points=64, reduction=ReductionConfig(k_q=3))
    assert hard.subspace.method != "probes"  # no joints given: the prior basis
    for binding, rigid in ((soft, False), (hard, True)):
        w = binding.instance._weights[0]
        spread = max(float((w[binding.instance.point_groups == g] - w[binding.instance.point_groups == g].mean(0))
                           .abs().max()) for g in (0, 1))
        assert (spread < 1e-6) == rigid


def test_base_frame_decoder_holds_the_base_part_and_keeps_relative_motion():
    """An articulated binding simulated with its base held: the base part decodes at rest for any q, the other
    part keeps its motion relative to the base (the wrapped decoder's, up to the base's rigid motion)."""
    from types import SimpleNamespace

    from kinemesh.dynamics.floating import BaseFrameDecoder, base_anchor_points
    from kinemesh.dynamics.scene import SimulationSpec, build_system
    from kinemesh.geometry.procrustes import kabsch
    from kinemesh.reduce import ReductionConfig, bind
    from tests.toys import toy_cabinet

    v, f, pid = toy_cabinet(1)
    b = bind(v, f, moving_model(), kind="articulated", part_ids=pid, n_points=128,
             reduction=ReductionConfig(k_q=3, basis="prior"), dtype=torch.float64)
    system, info = build_system(b.decoder, v, f, SimulationSpec(kind="articulated"))
    dec = system.decoder
    assert isinstance(dec, BaseFrameDecoder) and info["fixed_base"]
    base = np.asarray(b.decoder.point_groups) == 0  # the body has the largest box
    assert set(np.asarray(dec.anchors)) <= set(np.flatnonzero(base))
    q = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        held, free = dec.points(q).numpy(), b.decoder.points(q).numpy()
        vh, vf = dec.vertices(q).numpy(), b.decoder.vertices(q).numpy()
    rest = b.decoder.rest_points.numpy()
    for i in range(len(q)):
        assert np.abs(held[i][base] - rest[base]).max() < 1e-6 * np.ptp(rest, 0).max() + 1e-9
        R, t = kabsch(free[i][base], rest[base])  # the same rigid motion applied to everything
        assert np.allclose(held[i], free[i] @ R.T + t, atol=1e-6) and np.allclose(vh[i], vf[i] @ R.T + t, atol=1e-6)
    assert np.abs(held[:, ~base] - rest[~base]).max() > 1e-3  # the other parts still move
    with pytest.raises(Exception, match="at least 3"):
        base_anchor_points(rest, np.arange(len(rest)) < 2)
    door_sys, _ = build_system(b.decoder, v, f, SimulationSpec(kind="articulated", joints=False),  # a URDF's root
                               articulation=SimpleNamespace(root="lid"), part_names=["body", "lid", "drawer"])
    assert set(np.asarray(door_sys.decoder.anchors)) <= set(np.flatnonzero(np.asarray(b.decoder.point_groups) == 1))
    free_sys, free_info = build_system(b.decoder, v, f, SimulationSpec(kind="articulated", fixed_base=False))
    assert not free_info["fixed_base"] and not isinstance(free_sys.decoder, BaseFrameDecoder)


class TwoWayDecoder:
    """Two parts of 4 points each; q0 slides part A along x, q1 slides part A along x and part B along y by the
    same amount: both reach a target on A, only q0 leaves B alone."""

    def __init__(self):
        self.rest_points = torch.as_tensor(np.random.default_rng(0).uniform(size=(8, 3)))
        self.rest_vertices = self.rest_points
        self.mu_cond = torch.zeros(2, dtype=torch.float64)
        self.point_groups = np.repeat([0, 1], 4)
        self.vertex_groups = self.point_groups
        a = torch.zeros(8, 3, dtype=torch.float64)
        a[:4, 0] = 1.0
        b = a.clone()
        b[4:, 1] = 1.0
        self.modes = torch.stack([a, b])  # (2, P, 3)

    def points(self, q):
        return self.rest_points + torch.einsum("...k,kpc->...pc", q, self.modes)

    vertices = points


def test_drag_with_least_motion_leaves_the_other_part_alone():
    from kinemesh.dynamics.boundary import solve_positions
    from kinemesh.dynamics.system import System, make_handles

    dec = TwoWayDecoder()
    system = System(dec, torch.full((8,), 0.1, dtype=torch.float64), torch.zeros(2, dtype=torch.float64),
                    derivatives="fd")
    h = make_handles(dec, [0], k=1)
    target = (dec.rest_points[0] + torch.tensor([0.1, 0.0, 0.0], dtype=torch.float64))[None].numpy()
    plain, r0 = solve_positions(system, h, target, n_starts=1, reg=1e-2)
    least, r1 = solve_positions(system, h, target, n_starts=1, reg=1e-2, least_motion=0.3)
    assert r0 < 0.01 and r1 < 0.02  # both reach the target (least motion trades a little of it for less motion)
    assert float(plain[1]) > 0.03  # the Tikhonov term alone splits the motion between the two modes
    assert abs(float(least[1])) < 0.1 * abs(float(least[0])) and float(least[0]) > 0.08  # B stays put


class SmallPartDecoder:
    """A heavy body of 7 points that q_1 moves along y and a 1-point part (a wheel's rim) that q_0 moves along x
    by 1 cm per unit: a small part's coordinate moves little per unit."""

    def __init__(self):
        self.rest_points = torch.as_tensor(np.random.default_rng(1).uniform(size=(8, 3)))
        self.rest_vertices = self.rest_points
        self.mu_cond = torch.zeros(2, dtype=torch.float64)
        self.point_groups = np.array([0] + [1] * 7)
        self.vertex_groups = self.point_groups
        self.modes = torch.zeros(2, 8, 3, dtype=torch.float64)
        self.modes[0, 0, 0] = 0.01
        self.modes[1, 1:, 1] = 1.0

    def points(self, q):
        return self.rest_points + torch.einsum("...k,kpc->...pc", q, self.modes)

    vertices = points


def test_drag_of_a_small_part_reaches_its_target():
    """The Tikhonov term towards q_rest holds back a coordinate that moves its part little per unit (a real cart's
    wheels turned 0.6 of a 60 deg drag); the polishing stages, centred on the last answer, close that gap and
    leave the coordinate that moves nothing at the handle alone."""
    from kinemesh.dynamics.boundary import solve_positions
    from kinemesh.dynamics.system import System, make_handles

    dec = SmallPartDecoder()
    system = System(dec, torch.full((8,), 0.1, dtype=torch.float64), torch.zeros(2, dtype=torch.float64),
                    derivatives="fd")
    target = (dec.rest_points[0] + torch.tensor([0.01, 0.0, 0.0], dtype=torch.float64))[None].numpy()
    h = make_handles(dec, [0], k=1)
    plain, _ = solve_positions(system, h, target, n_starts=1)
    q, rms = solve_positions(system, h, target, n_starts=1, polish=True)
    assert float(plain[0]) < 0.7  # held back
    assert float(q[0]) == pytest.approx(1.0, abs=1e-3) and rms < 1e-5 and abs(float(q[1])) < 1e-6


def test_coordinates_without_a_prior_pass_the_barrier():
    """``prior_mask``: the soft barrier keeps the network's coordinates within ``barrier_radius`` std, not a joint's
    own coordinate (a wheel turned 3 rad, past the articulated radius 2): neither the dynamics' barrier force nor
    the drag solve holds it back."""
    from kinemesh.dynamics.boundary import solve_positions
    from kinemesh.dynamics.eom import latent_forces
    from kinemesh.dynamics.system import System, make_handles

    dec = SmallPartDecoder()
    target = (dec.rest_points[0] + torch.tensor([0.03, 0.0, 0.0], dtype=torch.float64))[None].numpy()  # q_0 = 3
    reached = {}
    for free in (False, True):
        system = System(dec, torch.full((8,), 0.1, dtype=torch.float64), torch.zeros(2, dtype=torch.float64),
                        derivatives="fd", barrier_radius=2.0, barrier_stiffness=100.0,
                        prior_mask=torch.tensor([not free, True]))
        q = torch.tensor([3.0, 0.0], dtype=torch.float64)
        assert (float(latent_forces(system, q)[0]) == 0.0) == free  # barrier force on q_0 only with a prior
        reached[free] = float(solve_positions(system, make_handles(dec, [0], k=1), target, n_starts=1,
                                              polish=True)[0][0])
    assert reached[True] == pytest.approx(3.0, abs=1e-3) and reached[False] < 2.2


def test_held_drag_short_of_its_target_holds_where_it_got():
    """--hold pulls to the target when the drag reaches it, else to where the drag got: a spring to a target no
    state reaches stored 1/2 k gap^2 that pressed q into the barrier (an unlike ceiling fan's drag diverged)."""
    from kinemesh.dynamics.eom import energies
    from kinemesh.dynamics.scene import SimulationSpec, initial_conditions
    from kinemesh.dynamics.system import State, System

    dec = TwoWayDecoder()  # nothing moves along z
    for offset, short in (([0.1, 0.0, 0.0], False), ([0.1, 0.0, 1.0], True)):
        system = System(dec, torch.full((8,), 0.1, dtype=torch.float64), torch.zeros(2, dtype=torch.float64),
                        derivatives="fd")
        system.q_rest = torch.zeros(2, dtype=torch.float64)
        target = dec.rest_points[0].numpy() + offset
        state, _ = initial_conditions(system, SimulationSpec(drag_vertex=0, drag_to=tuple(target), hold=True))
        held = system.springs[0].target[0].numpy()
        assert abs(held[0] - target[0]) < 0.02 and held[2] == pytest.approx(target[2] - (1.0 if short else 0.0))
        assert energies(system, State(state.q, state.qd, 0.0))["potential"] < 1e-3  # q0 is the spring's rest


def test_part_stops_relax_at_the_released_pose():
    from kinemesh.dynamics.system import PartContacts

    x0 = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, -0.01]], dtype=torch.float64)  # i above j's surface (+z)
    stop = PartContacts(torch.tensor([0]), torch.tensor([1]), torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64),
                        torch.zeros(1, dtype=torch.float64), slack=0.001, depth=1e-3)
    m = torch.ones(2, dtype=torch.float64)
    deep = x0.clone()
    deep[0, 2] = -0.02  # released 1 cm inside j's rest surface (gap -0.01 < -slack)
    assert float(stop.contact_forces(deep, None, m)[0, 2]) > 0  # a fresh stop pushes it out
    stop.relax(deep)
    assert float(stop.contact_forces(deep, None, m).abs().max()) == 0.0  # relaxed: no push where it was let go
    deeper = deep.clone()
    deeper[0, 2] -= 0.01
    assert float(stop.contact_forces(deeper, None, m)[0, 2]) > 0  # but it cannot go deeper
    stop.relax(x0)  # a later release relaxes from the rest gaps again, not from the previous release
    assert float(stop.gap0[0]) == pytest.approx(0.0)
