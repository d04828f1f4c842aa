"""``kinemesh ik``: fit the kinematic state of a rest mesh to a target mesh or point cloud."""

from __future__ import annotations


def register(sub) -> None:
    from kinemesh.checks import add_part_arguments, number

    p = sub.add_parser(
        "ik",
        help="inverse kinematics: fit a rest mesh's kinematic state to a target mesh or point cloud",
        description="Fit the reduced kinematic state q of REST (NeuROK Sec. 4.3 / 6.1) so that the decoded "
        "shape matches TARGET (a mesh of any topology, or a full or partial point cloud), and write the "
        "fitted mesh. Prints the fit error in normalized units (rest bbox longest side = 1).",
    )
    p.add_argument("--rest", required=True, help="rest mesh (OBJ/PLY/STL/GLB/OFF), URDF or PartNet-Mobility folder")
    add_part_arguments(p)
    p.add_argument("--target", required=True,
                   help="target mesh, or point cloud (.npy (n,3), .xyz/.txt/.csv, .ply without faces)")
    p.add_argument("--out", required=True, help="fitted mesh to write (.obj), in the target's frame")
    p.add_argument("--checkpoint", default=None, help="model checkpoint folder (default: the shipped model)")
    p.add_argument("--partial", action="store_true", help="the target covers part of the surface: one-sided Chamfer")
    p.add_argument("--normalize-target", action="store_true",
                   help="the target may be at another scale/position: normalize it and fit a similarity too")
    p.add_argument("--loss", choices=("auto", "chamfer", "vertex"), default="auto",
                   help="data term (auto: vertex L2 when the target shares the rest mesh's topology)")
    p.add_argument("--k-q", type=int, default=None,
                   help="reduced coordinates (default: 99%% explained, <= 32; at least 8 for a URDF / "
                        "PartNet-Mobility input, as simulate binds it)")
    p.add_argument("--no-reduction", action="store_true", help="fit the raw latent z (ablation)")
    p.add_argument("--calibrated-prior", action="store_true",
                   help="reduce in the calibrated prior (kinemesh calibrate) instead of N(mu_cond, I)")
    p.add_argument("--subspace-method", choices=("jacobian", "gradient"), default="jacobian",
                   help="active-subspace matrix: E[J^T J] (default) or the paper's E[grad G grad G^T]")
    p.add_argument("--rigidity", type=number(float, 0), default=0.0, help="weight of the within-part rigidity term")
    p.add_argument("--starts", type=int, default=4, help="multi-start count (best prior samples)")
    p.add_argument("--steps", type=int, default=80, help="Adam steps before L-BFGS")
    p.add_argument("--polish-steps", type=int, default=40,
                   help="Adam steps of the full-latent polish after the reduced fit (0 = reduced q only)")
    p.add_argument("--free-parts", action="store_true",
                   help="URDF / PartNet-Mobility input: move the parts as the network decodes them (the largest part "
                        "held) instead of only along the object's joints with its root held (the default)")
    p.add_argument("--binding", choices=("auto", "joints", "prior"), default="auto",
                   help="a mesh whose parts the file gives (groups, nodes, part ids, --labels): move them along joints "
                        "predicted from the static shape, by the model's prior basis, or fit both and keep the "
                        "nearer (auto, twice the time)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write q, z and the errors as JSON here")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    p.add_argument("--save-subspace", default=None, metavar="DIR",
                   help="write the instance's active subspace (subspace.safetensors + subspace.json) here")
    p.add_argument("--spectrum", default=None, metavar="PNG", help="plot the active-subspace eigen-spectrum here")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.set_defaults(func=run)


MIN_MOTION = 1e-3
"""Target motion (mean vertex distance to the rest pose, normalized units) below which "motion explained"
is not defined: 1 - error / motion divides by noise (it printed -111705217.1 % for target = rest)."""


def motion_explained(vertex_error: float, rest_error: float) -> float | None:
    """The fraction of the target's motion the fit explains, 1 - vertex_error / rest_error, or None when the
    target barely moves from the rest pose (rest_error < MIN_MOTION, normalized units)."""
    return None if not rest_error >= MIN_MOTION else 1.0 - vertex_error / rest_error


def run(args) -> int:
    import dataclasses
    import json

    import numpy as np
    import torch

    from kinemesh.atomic import write_text
    from kinemesh.checks import out_file
    from kinemesh.data.exporters import export_obj
    from kinemesh.errors import ConfigError, InputFileError, KinemeshError
    from kinemesh.ik import IKConfig, make_target, solve
    from kinemesh.dynamics.joints import JointDecoder
    from kinemesh.ik.pipeline import IK_REDUCTION, URDFBinding, bind_ik, load_target

    if args.steps < 0 or args.starts < 1 or args.polish_steps < 0:
        raise ConfigError("--steps and --polish-steps must be >= 0 and --starts >= 1")
    if args.device != "cpu":
        raise ConfigError("kinemesh ik runs on cpu (the k-d tree Chamfer is CPU code)")
    out_file(args.out, force=args.force)
    if args.json:
        out_file(args.json, force=args.force, option="--json")
    from kinemesh.geometry.segments import load_segmented

    wm = load_segmented(args.rest, labels=args.labels, auto_parts=not args.no_auto_parts, max_vertices=None)
    # the rest mesh keeps the file's vertices (targets may share them); parts follow each file vertex
    rest_v, rest_f = wm.file_vertices, wm.file_faces
    part_ids = None if wm.part_ids is None else wm.part_ids[wm.to_work]
    tv, tf = load_target(args.target)
    try:
        target = make_target(tv, tf, rest_v, rest_f, partial=args.partial, normalize=args.normalize_target,
                             correspondences=None if args.loss == "auto" else args.loss == "vertex",
                             seed=args.seed)
    except InputFileError:
        raise
    except KinemeshError as exc:
        raise InputFileError(args.target, str(exc)) from None
    torch.manual_seed(args.seed)
    red = dataclasses.replace(IK_REDUCTION, enabled=not args.no_reduction, k_q=args.k_q,
                              method=args.subspace_method, calibrated_prior=args.calibrated_prior)
    # a URDF / PartNet-Mobility input: articulated, reduced along its joints, parts moved along them with the root
    # held (ik.pipeline.URDFBinding)
    how = URDFBinding(joints=not args.free_parts)
    cfg = IKConfig(loss=args.loss, n_starts=args.starts, adam_steps=args.steps, rigidity_weight=args.rigidity,
                   fit_similarity=args.normalize_target, seed=args.seed, refine_z_steps=args.polish_steps)
    # a mesh whose parts the file gives (OBJ groups, GLB nodes or part ids, --labels) and no joints: its parts can
    # move along joints predicted from the static shape, as simulate and sample move them; with --binding auto
    # both fits run and the one nearer the target is kept (on the 37 real validation objects written as OBJs with
    # their links as groups, motion explained 70.9 % with the prior basis, 85.8 % along predicted joints, 94.3 %
    # keeping the better: docs/results/ik_real.md). Not for the automatic grouping, whose split links each get a
    # joint of their own.
    bindings = [(wm.articulation, "given" if wm.articulation is not None else "none")]
    if (wm.articulation is None and wm.part_source not in ("none", "auto") and not args.free_parts
            and args.binding != "prior"):
        from kinemesh.articulation.probes import articulation_for

        art, why = articulation_for(np.asarray(wm.mesh.vertices), np.asarray(wm.mesh.faces), wm.part_ids,
                                    wm.part_names, seed=args.seed)
        if art is not None:
            bindings = ([] if args.binding == "joints" else bindings) + [(art, "predicted")]
        else:
            print(f"no joints predicted ({why}): parts moved by the prior basis")
    fits = []
    for art, joints_from in bindings:
        torch.manual_seed(args.seed)
        decoder, sub, _ = bind_ik(rest_v, rest_f, args.checkpoint, red, part_ids, wm.part_names, art, how,
                                  seed=args.seed, device=args.device)
        res = solve(decoder, target, cfg)
        fits.append((res.errors.get("vertex_error", res.errors["chamfer_l1"]), joints_from, decoder, sub, res))
    _, joints_from, decoder, sub, res = min(fits, key=lambda x: x[0])  # the first (prior basis) on ties
    if len(fits) > 1:
        print("parts moved " + ("along joints predicted from the static shape" if joints_from == "predicted" else
                                "by the prior basis") + " (fit error " + ", ".join(
            f"{'predicted joints' if j == 'predicted' else 'prior basis'} {e:.5f}" for e, j, *_ in fits) + ")")
    if sub is not None and args.save_subspace:
        sub.save(args.save_subspace)
    if sub is not None and args.spectrum:
        from kinemesh.viz.plots import plot_spectrum

        plot_spectrum(args.spectrum, sub.eigenvalues, sub.k)
    face_parts, names = wm.face_parts()  # the rest's parts, as the fitted OBJ's o groups (never decimated here)
    export_obj(res.vertices_target_frame, rest_f, args.out, face_parts=face_parts, part_names=names)
    import trimesh

    from kinemesh.geometry.normalize import normalization
    from kinemesh.ik.solver import chamfer_l1

    # the rest pose's Chamfer with as many surface samples as the fit's, drawn apart from the target's (the fit's
    # samples are the model's own): it carries the same floor two samplings of one surface leave, to read the
    # fit's against
    s = normalization(rest_v)[1]
    rest_pts = trimesh.sample.sample_surface(trimesh.Trimesh(rest_v, rest_f, process=False), len(res.points),
                                             seed=args.seed + 1)[0]
    rest_ch = float(chamfer_l1(torch.as_tensor(rest_pts, dtype=torch.float32)[None] * s,
                               target.points.float() * s, target.partial)[0])
    msg = f"fit error: Chamfer-L1 {res.errors['chamfer_l1']:.5f} (rest pose {rest_ch:.5f})"
    if "vertex_error" in res.errors:
        rest_err = float(np.linalg.norm(rest_v - target.vertices.numpy(), axis=1).mean())
        ve = res.errors["vertex_error"]
        rest_err *= s
        expl = motion_explained(ve, rest_err)
        msg += (f", vertex error {ve:.5f} (rest pose {rest_err:.5f}, motion explained "
                + ("n/a: the target is the rest pose)" if expl is None else f"{expl:.1%})"))
    msg += " [normalized units: rest bbox longest side = 1]"
    dims = f"q ({sub.k} of {sub.latent_dim} latent dims" if sub is not None else f"z ({decoder.latent_dim} dims"
    own = len(getattr(decoder.decoder if sub is not None else decoder, "direct", ()) or ())
    dims += (", and 1 joint with a coordinate of its own)" if own == 1 else
             f", and {own} joints with coordinates of their own)" if own else ")")
    if res.polished:
        dims += ", then polished in z"
    jd = decoder.decoder if sub is not None else decoder
    joints = {}
    if isinstance(jd, JointDecoder):  # the fitted joint values (rad / m), z being the joint decoder's latent
        values = jd.joint_values(torch.as_tensor(res.z).to(jd.mu_cond))
        joints = {j.name: float(values[i]) for i, j in enumerate(jd.joints) if j.name in jd.active + jd.direct}
        msg += "\njoint values: " + ", ".join(f"{n} {v:.4g}" for n, v in joints.items())
    print(msg)
    print(f"fitted {dims} in {res.seconds:.2f} s -> {args.out}")
    if args.json:
        write_text(args.json, json.dumps({
            "latent": res.latent.tolist(), "z": res.z.tolist(), "errors": res.errors, "seconds": res.seconds,
            "rest_chamfer_l1": rest_ch, "reduced": sub is not None, "polished": res.polished,
            "scale": res.similarity[0] * target.scale,
            "joints": joints, "joints_from": joints_from,
        }, indent=2) + "\n")
    return 0
