"""Part-aware inputs: the segmentation of URDF folders, OBJ groups, GLB nodes and --labels files, the automatic
grouping of a plain mesh's components, the kind guess of welded articulated meshes, and the real-object drag
metrics (kinemesh.eval.real) on known motions."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from kinemesh.errors import InputFileError
from kinemesh.geometry.kind import group_components, guess_kind
from kinemesh.geometry.segments import load_segmented
from tests.data_fixtures import make_partnet_folder
from tests.toys import box, merge_meshes, moving_model, subdivide, three_component_door, write_obj_groups


def _cabinet():
    """A body box, two buttons glued on its front (small components) and a door in three components: a slab,
    a glass pane welded into it along its rim, and a handle; the door touches the body at the hinge edge.
    Returns (vertices, faces, {component: (first vertex, count)}) with the door's vertices last."""
    body = subdivide(*box([0, 0, 0], [1.0, 0.8, 0.9]), 1)
    buttons = [box([-0.01, 0.60 + 0.05 * i, 0.7], [0.0, 0.63 + 0.05 * i, 0.73]) for i in range(2)]
    slab = box([-0.05, 0.0, 0.0], [0.0, 0.55, 0.9])  # touches the body along x = 0 only
    # the pane is a second skin on the slab's front face (it shares all four corners with the slab)
    glass = (np.array([[-0.05, 0, 0], [-0.05, 0.55, 0], [-0.05, 0.55, 0.9], [-0.05, 0, 0.9]]),
             np.array([[0, 1, 2], [0, 2, 3]]))
    handle = box([-0.07, 0.45, 0.4], [-0.05, 0.48, 0.44])
    parts = [body, *buttons, slab, glass, handle]
    v, f = merge_meshes(*parts)
    door_start = sum(len(p[0]) for p in parts[:3])
    return v, f, door_start


def test_group_components_keeps_a_welded_door_apart_and_its_pieces_together():
    v, f, door = _cabinet()
    g = group_components(v, f)
    assert g.max() == 1  # body (+ buttons) and door (+ glass, handle)
    assert len(np.unique(g[:door])) == 1 and len(np.unique(g[door:])) == 1 and g[0] != g[door]
    # welding coincident vertices (what a loader does) would make body and door one component: they touch
    from kinemesh.geometry.kind import connected_components
    _, inv = np.unique(np.round(v * 1e6), axis=0, return_inverse=True)
    assert len(np.unique(connected_components(inv.max() + 1, inv.reshape(-1)[f]))) < 6
    # a sphere split along a UV seam (vertices duplicated) is one part
    import trimesh
    s = trimesh.creation.uv_sphere(count=[16, 16])
    sv, sf = np.asarray(s.vertices), np.asarray(s.faces)
    top = sv[sf].mean(1)[:, 2] > 0
    halves = [(sv, sf[top]), (sv, sf[~top])]
    hv, hf = merge_meshes(*halves)
    assert group_components(hv, hf).max() == 0


def test_guess_kind_welded_door_blob_sheet():
    import trimesh

    v, f, _ = _cabinet()
    assert guess_kind(v, f) == "articulated"  # box with a door as separate components
    ball = trimesh.creation.icosphere(subdivisions=2)
    assert guess_kind(ball.vertices, ball.faces) == "elastic"
    sheet = trimesh.creation.box(extents=(1, 1, 1e-3))
    grid = trimesh.Trimesh(*subdivide(np.asarray(sheet.vertices)[:, :], np.asarray(sheet.faces), 0))
    top = grid.triangles_center[:, 2] > 0
    assert guess_kind(grid.vertices, grid.faces[top]) == "cloth"


def test_guess_kind_counts_low_poly_parts_by_size_and_thin_blades_are_articulated():
    """A part counts by its size too: a dense box with an eight-vertex lid (a real storage box's links) is
    articulated, as is a cart body with four low-poly wheels; two thin open blades given as parts (scissors)
    are articulated, not cloth, while one thin open sheet stays cloth."""
    import trimesh

    body = subdivide(*box([0, 0, 0], [1.0, 0.8, 0.6]), 4)
    lid = box([0, 0, 0.6], [1.0, 0.8, 0.65])  # 8 vertices: < 2% of the mesh's
    v, f = merge_meshes(body, lid)
    assert len(lid[0]) < 0.02 * len(v)
    ids = np.r_[np.zeros(len(body[0]), int), np.ones(len(lid[0]), int)]
    assert guess_kind(v, f, ids) == "articulated"
    wheels = [box([x, y, -0.2], [x + 0.2, y + 0.05, 0.0]) for x in (0.0, 0.8) for y in (0.0, 0.75)]
    v, f = merge_meshes(body, *wheels)
    assert guess_kind(v, f) == "articulated"  # the plain mesh: its components grouped, wheels sizeable
    sheet = trimesh.Trimesh(*subdivide(*box([0, 0, 0], [1.0, 0.2, 0.01]), 2))
    top = sheet.triangles_center[:, 2] > 0.005
    blade = (np.asarray(sheet.vertices), np.asarray(sheet.faces)[top])  # an open thin strip
    other = (blade[0] + [0.9, 0.0, 0.02], blade[1])
    v, f = merge_meshes(blade, other)
    assert guess_kind(v, f, np.repeat([0, 1], len(blade[0]))) == "articulated"
    assert guess_kind(*blade) == "cloth"


def test_guess_kind_on_converted_microwave(real_objects_dir, tmp_path):
    """The issue's microwave, converted to a plain OBJ: welded (one component once coincident vertices merge),
    articulated all the same, and its door is one part apart from the body."""
    from kinemesh.data.partnet import load_articulated

    src = real_objects_dir / "kitchenmodels__7236"
    if not src.is_dir():
        pytest.skip("kitchenmodels__7236 not in the shared real objects")
    obj = load_articulated(src)
    v, f, links = obj.merged({})
    assert guess_kind(v, f) == "articulated"
    g = group_components(v, f)
    assert g.max() == 1 and all(len(np.unique(g[links == i])) == 1 for i in np.unique(links))


def _door_rigidity(wm, tmp_path):
    """Bind a tiny model (large random weights: it moves things) with the mesh's parts and decode prior
    samples. Returns (within-part rigidity error of the door, its mean motion, both / object size, and the
    number of groups its vertices follow and of connected components it has)."""
    from kinemesh.geometry import metrics
    from kinemesh.reduce import ReductionConfig, bind

    model = moving_model()
    v, f = np.asarray(wm.mesh.vertices), np.asarray(wm.mesh.faces)
    red = ReductionConfig(enabled=False, calibrated_prior=False)
    door = wm.part_ids == wm.part_ids[np.argmin(np.asarray(wm.mesh.vertices)[:, 0])]  # the door is at -x
    b = bind(v, f, model, kind="articulated", part_ids=wm.part_ids, reduction=red, n_points=128)
    with torch.no_grad():
        x = b.instance.vertices(b.instance.prior_sample(4, seed=1, std=3.0)).double().numpy()
    size = np.ptp(v, axis=0).max()
    rigid = metrics.within_part_rigidity(v[door], x[:, door], np.zeros(door.sum(), int)) * np.ptp(v[door], 0).max()
    from kinemesh.geometry.kind import connected_components

    return (rigid / size, float(np.linalg.norm(x[:, door] - v[door], axis=-1).mean() / size),
            len(np.unique(b.instance.vertex_groups[door])), len(np.unique(connected_components(len(v), f)[door])))


def test_obj_groups_move_as_one(tmp_path):
    groups = three_component_door()
    # the door's three components form one OBJ group
    merged = merge_meshes(*[(v, f) for _, v, f in groups[1:]])
    path = tmp_path / "cab.obj"
    write_obj_groups(path, [("body", groups[0][1], groups[0][2]), ("door", *merged)])
    wm = load_segmented(path)
    assert wm.part_source == "groups" and wm.part_names == ["body", "door"]
    assert np.array_equal(np.bincount(wm.part_ids), [8, 24])
    rigid, motion, groups, alone = _door_rigidity(wm, tmp_path)
    assert rigid < 1e-6 and motion > 0.05 and groups == 1 and alone == 3  # three pieces, one rigid part


def test_glb_nodes_and_labels_move_as_one(tmp_path):
    import trimesh

    groups = three_component_door()
    scene = trimesh.Scene()
    door = merge_meshes(*[(v, f) for _, v, f in groups[1:]])
    scene.add_geometry(trimesh.Trimesh(groups[0][1], groups[0][2]), node_name="body", geom_name="body")
    scene.add_geometry(trimesh.Trimesh(*door, process=False), node_name="door", geom_name="door")
    path = tmp_path / "cab.glb"
    scene.export(path)
    wm = load_segmented(path)
    assert wm.part_source == "nodes" and sorted(np.bincount(wm.part_ids)) == [8, 24]
    assert _door_rigidity(wm, tmp_path)[0] < 1e-6 and _door_rigidity(wm, tmp_path)[2] == 1
    # the same mesh as a plain OBJ with a per-vertex and a per-face label file
    v, f = merge_meshes(*[(v, f) for _, v, f in groups])
    plain = tmp_path / "plain.obj"
    write_obj_groups(plain, [("all", v, f)])
    per_vertex = np.repeat([0, 1], [8, 24])
    np.save(tmp_path / "v.npy", per_vertex)
    (tmp_path / "f.txt").write_text("\n".join(["body"] * 12 + ["door"] * 36) + "\n")
    for labels, source_names in ((tmp_path / "v.npy", ["0", "1"]), (tmp_path / "f.txt", ["body", "door"])):
        wm = load_segmented(plain, labels=labels)
        assert wm.part_source == "labels" and wm.part_names == source_names
        assert np.array_equal(wm.part_ids[wm.to_work], per_vertex)
        assert _door_rigidity(wm, tmp_path)[0] < 1e-6 and _door_rigidity(wm, tmp_path)[2] == 1
    (tmp_path / "bad.txt").write_text("1\n2\n3\n")
    with pytest.raises(InputFileError, match="bad.txt: 3 labels for the 48 faces and 32 vertices"):
        load_segmented(plain, labels=tmp_path / "bad.txt")
    # no labels, no groups: the door's three separate pieces stay separate parts unless grouped
    auto = load_segmented(plain)
    assert auto.part_source == "auto" and auto.part_ids.max() >= 1
    off = load_segmented(plain, auto_parts=False)
    assert off.part_ids is None and off.part_source == "none"


def test_partnet_folder_links_and_split_welded_vertices(tmp_path):
    from kinemesh.data.meshes import working_mesh
    from kinemesh.data.partnet import load_articulated

    folder = make_partnet_folder(tmp_path / "obj")
    wm = load_segmented(folder)
    obj = load_articulated(folder)
    v, f, links = obj.merged({})
    assert wm.part_source == "links" and wm.part_names == [p.name for p in obj.parts]
    assert np.array_equal(wm.part_ids[wm.to_work], links)  # vertex ids are those of the links in order
    assert np.allclose(np.asarray(wm.mesh.vertices)[wm.to_work], v)
    # a vertex shared by two parts is split into one copy per part; within a part duplicates merge
    v2 = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 0.0]])
    f2 = np.array([[0, 1, 2], [1, 3, 2], [4, 1, 2]])
    w = working_mesh(v2, f2, None, np.array([0, 1, 0]))
    assert len(w.mesh.vertices) == 6  # 1 and 2 used by both parts; 0 and 4 coincide in part 0
    assert w.to_work[0] == w.to_work[4] and sorted(np.bincount(w.part_ids)) == [3, 3]


def test_simulate_cli_moves_a_part_as_one(tmp_path):
    """kinemesh simulate on OBJ groups: the run records the parts and the door (three components) stays rigid."""
    from kinemesh.cli import main
    from kinemesh.data.sequence import KinematicSequence
    from kinemesh.geometry import metrics
    from kinemesh.model import untrained_model

    groups = three_component_door()
    door = merge_meshes(*[(v, f) for _, v, f in groups[1:]])
    path = tmp_path / "cab.obj"
    write_obj_groups(path, [("body", groups[0][1], groups[0][2]), ("door", *door)])
    untrained_model("tiny").save(tmp_path / "ck")
    assert main(["simulate", str(path), "--checkpoint", str(tmp_path / "ck"), "--action", "drag", "--vertex", "31",
                 "--to=-0.5,0.6,0.6", "--hold", "--frames", "3", "--points", "64", "--k-q", "2",
                 "--out", str(tmp_path / "d.glb"), "--npz", str(tmp_path / "d.npz")]) == 0
    seq = KinematicSequence.load(tmp_path / "d.npz")
    assert seq.kind == "articulated" and np.array_equal(seq.part_ids, np.repeat([0, 1], [8, 24]))
    # rigid up to the rest-fit correction simulate adds per vertex (an untrained model fits the rest poorly)
    assert metrics.within_part_rigidity(seq.rest_vertices[8:], seq.frames[:, 8:], np.zeros(24, int)) < 0.01


def test_drag_metrics_on_known_motions():
    """follow / rest motion / detachment of kinemesh.eval.real on a hinged box posed exactly (an oracle)."""
    from kinemesh.data.articulated import ArticulatedObject, Joint, Part
    from kinemesh.eval.real import asked_motion, component_detachment, followed, subtree_mask, summarize

    bv, bf = box([0, 0, 0], [1, 1, 1])
    dv, df = box([-0.05, 0, 0], [0, 1, 1])
    hinge = Joint("hinge", "revolute", "body", "door", (0, 0, 1), (0, 1, 0), (0.0, 2.0))
    slide = Joint("slide", "prismatic", "body", "door", (-1, 0, 0), (0, 0, 0), (0.0, 0.4))
    for j, want in ((hinge, np.radians(60)), (slide, 0.2)):
        obj = ArticulatedObject([Part("body", bv, bf), Part("door", dv, df)], [j])
        v, f, pid = obj.merged({})
        moving = subtree_mask(obj, pid, "door")
        assert np.array_equal(moving, pid == 1)
        asked = asked_motion(j)
        assert asked == pytest.approx(want)
        for frac in (1.0, 0.5, -0.25):
            posed = obj.merged({j.name: frac * asked})[0]
            assert followed(v[moving], posed[moving], j, asked) == pytest.approx(frac, abs=1e-9)
            assert component_detachment(v, posed, pid, pid, 1.0) < 1e-9
    assert asked_motion(Joint("h", "revolute", "a", "b", (0, 0, 1), (0, 0, 0), (-0.5, 0.3))) == pytest.approx(-0.5)
    # a component leaving its part's rigid motion is measured
    comps = np.arange(len(v)) // 4
    broken = v.copy()
    broken[:4] += [0.0, 0.0, 0.3]
    assert component_detachment(v, broken, pid, comps, 1.0) > 0.1
    rows = [{"drags": [{"follow": 1.0, "rest_motion": 0.0, "attached": True},
                       {"follow": 0.5, "rest_motion": 0.04, "attached": False}],
             "prior_attached": 1.0, "prior_rigidity": 0.002, "seconds": 1.0}]
    s = summarize(rows)
    assert s["follow_share"] == 0.5 and s["rest_motion"] == pytest.approx(0.02) and s["attached"] == 0.5


def test_the_drag_test_drags_the_part_itself_not_the_last_link_of_its_chain():
    """A stapler-like chain: an arm hinged on the base and a longer arm hinged on its end. The first joint's drag
    takes the vertex of the first arm farthest from its hinge (the second arm's tip is farther: dragging it, the
    drag reached it with the second arm's own joint), and its follow is read on the first arm alone."""
    from kinemesh.data.articulated import ArticulatedObject, Joint, Part
    from kinemesh.eval.real import drag_vertex, followed, own_mask, subtree_mask

    parts = [Part("base", *box([0, 0, 0], [1, 0.2, 0.1])), Part("arm", *box([0, 0, 0.1], [0.5, 0.2, 0.15])),
             Part("tip", *box([0.5, 0, 0.1], [1.5, 0.2, 0.15]))]
    j1 = Joint("j1", "revolute", "base", "arm", (0, 1, 0), (0, 0, 0.1), (-1.0, 0.0))
    j2 = Joint("j2", "revolute", "arm", "tip", (0, 1, 0), (0.5, 0, 0.1), (-1.0, 1.0))
    obj = ArticulatedObject(parts, [j1, j2])
    v, _, pid = obj.merged({})
    names = [p.name for p in parts]
    moving = subtree_mask(obj, pid, "arm", names)
    own = own_mask(pid, "arm", names, moving)
    assert np.array_equal(own, pid == 1) and moving.sum() > own.sum()
    assert pid[drag_vertex(v, moving, j1)] == 2  # the subtree's farthest point is on the tip
    vid = drag_vertex(v, own, j1)
    assert pid[vid] == 1 and v[vid][0] == pytest.approx(0.5)
    # the tip folded back by its own joint: the arm has not turned, whatever the subtree's best fit says
    posed = obj.merged({"j2": -1.0})[0]
    assert followed(v[own], posed[own], j1, -0.5) == pytest.approx(0.0, abs=1e-9)
    assert abs(followed(v[moving], posed[moving], j1, -0.5)) > 0.1
    # a part without vertices of its own falls back to its subtree
    assert np.array_equal(own_mask(pid, "missing", names, moving), moving)


def test_drag_joints_drag_a_screw_cap_once():
    """A screw cap (PartNet-Mobility: body -> prismatic -> helper link without geometry -> continuous -> cap) is one
    movable part: the drag test drags it along its turn only; a slide into a link without geometry that carries
    nothing movable (a merged link) stays a drag."""
    from kinemesh.data.articulated import ArticulatedObject, Joint, Part
    from kinemesh.eval.real import drag_joints

    bv, bf = box([0, 0, 0], [1, 1, 1])
    cv, cf = box([0.4, 0.4, 1.0], [0.6, 0.6, 1.1])
    empty = (np.zeros((0, 3)), np.zeros((0, 3), np.int64))
    screw = ArticulatedObject([Part("body", bv, bf), Part("helper", *empty), Part("cap", cv, cf)], [
        Joint("lift", "prismatic", "body", "helper", (0, 0, 1), (0, 0, 0), (0.0, 0.05)),
        Joint("turn", "continuous", "helper", "cap", (0, 0, 1), (0.5, 0.5, 0), None)])
    assert [j.name for j in drag_joints(screw)] == ["turn"]
    slide = ArticulatedObject([Part("body", bv, bf), Part("helper", *empty), Part("cap", cv, cf)], [
        Joint("lift", "prismatic", "body", "helper", (0, 0, 1), (0, 0, 0), (0.0, 0.05)),
        Joint("weld", "fixed", "helper", "cap", (0, 0, 1), (0, 0, 0), None)])
    assert [j.name for j in drag_joints(slide)] == ["lift"]


def test_group_components_details_join_their_nearest_big_group():
    """Small details join the big group whose surface is nearest (the pruned search gives the brute force's
    answer): six big boxes in a row, each with details beside it."""
    from kinemesh.geometry.metrics import point_to_surface_distance

    rng = np.random.default_rng(3)
    bigs = [box([1.2 * i, 0, 0], [1.2 * i + 1.0, 1.0, 1.0]) for i in range(6)]
    details = []
    for _ in range(14):
        c = rng.uniform([-0.1, -0.1, -0.1], [7.0, 1.1, 1.1])
        details.append(box(c, c + 0.02))
    v, f = merge_meshes(*bigs, *details)
    g = group_components(v, f)
    assert g.max() == 5  # the six boxes; every detail joined one
    start = sum(len(b[0]) for b in bigs)
    for d in details:
        dv = v[start:start + len(d[0])]
        brute = np.argmin([point_to_surface_distance(dv, *b).min() for b in bigs])
        first = sum(len(b[0]) for b in bigs[:brute])
        assert g[start] == g[first]
        start += len(d[0])


def test_sequence_face_parts_welds_fixed_links_to_their_parent():
    """A sequence's parts as the rest OBJ's groups: names from meta["parts"], a link on a fixed joint (a handle)
    joins its door, as ``link_parts`` does for the URDF; no part_ids, no parts."""
    from kinemesh.data.sequence import KinematicSequence
    from kinemesh.geometry.segments import sequence_face_parts

    v, f = merge_meshes(box([0, 0, 0], [1, 1, 1]), box([1, 0, 0], [1.1, 1, 1]),
                        box([1.1, 0.4, 0.4], [1.2, 0.5, 0.5]))
    pid = np.repeat([0, 2, 3], 8)  # part ids need not be contiguous (a link without geometry between)
    meta = {"kind": "articulated", "parts": [{"name": "body"}, {"name": "door"}, {"name": "handle"}],
            "joints": [{"name": "hinge", "type": "revolute", "parent": "body", "child": "door"},
                       {"name": "weld", "type": "fixed", "parent": "door", "child": "handle"}]}
    seq = KinematicSequence(v, f, v[None], np.zeros(1), pid, meta)
    face_parts, names = sequence_face_parts(seq)
    assert names == ["body", "door"]
    np.testing.assert_array_equal(face_parts, np.repeat([0, 1, 1], 12))
    seq.meta = {"kind": "articulated"}  # no names listed: part_<id>, nothing welded
    assert sequence_face_parts(seq)[1] == ["part_0", "part_2", "part_3"]
    seq.part_ids = None
    assert sequence_face_parts(seq) == (None, [])
