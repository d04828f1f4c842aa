"""``kinemesh articulate``: infer joints of a segmented static mesh (or fit them to observed motion) and export
articulation JSON, URDF, MJCF and a PNG with the joint axes drawn."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("articulate", help="infer part joints (type, axis, origin, limits) and export URDF/MJCF",
                       description=__doc__)
    p.add_argument("input", help="URDF / PartNet-Mobility folder, .npz sequence, GLB (nodes), OBJ (groups) or "
                                 "any mesh (--labels, else its connected components grouped as simulate "
                                 "groups them)")
    p.add_argument("--out", required=True, help="output folder (written atomically; an existing non-empty "
                                                "folder needs --force)")
    p.add_argument("--force", action="store_true", help="replace an existing non-empty --out folder")
    p.add_argument("--prompt", default=None, help='text naming the part to articulate, e.g. "open the left door"')
    p.add_argument("--observed", default=None,
                   help="observed motion to fit joints to (ATOP stage 2): a .npz KinematicSequence with part_ids "
                        "(part names as in INPUT), a folder of per-frame point clouds (.npy/.ply/.xyz), or 'model' "
                        "(samples of the kinematic model, --checkpoint)")
    p.add_argument("--checkpoint", default=None, help="kinematic model checkpoint for --observed model")
    p.add_argument("--weights", default=None, help="predictor folder (config.json + model.safetensors); "
                                                   "default: the shipped weights")
    p.add_argument("--labels", default=None, help="per-face part labels (.npy ints or text, one per face)")
    p.add_argument("--no-auto-parts", action="store_true",
                   help="a plain mesh's parts are its connected components, not grouped as simulate groups "
                        "them")
    p.add_argument("--up", choices=["y", "z"], default=None, help="up axis of a mesh file (default z; GLB: y)")
    p.add_argument("--no-validity", action="store_true", help="skip the sweep check that picks opening directions")
    p.add_argument("--no-render", action="store_true", help="do not render articulation.png")
    p.add_argument("--candidates", action="store_true",
                   help="also write candidates.json: every part's physically valid box candidate motions "
                        "(GEOPARD self-supervision labels: no collision, no detachment)")
    p.add_argument("--usd", action="store_true", help="also write object.usda: meshes and UsdPhysics joints "
                                                      "(needs the optional usd-core: pip install 'kinemesh[usd]')")
    p.add_argument("--device", default="cpu", help="torch device (cpu|cuda)")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    import numpy as np

    from kinemesh.articulation import export
    from kinemesh.articulation.infer import PartPrediction, articulate, geometric_parts, part_tree, to_articulated
    from kinemesh.articulation.parts import load_parts
    from kinemesh.atomic import atomic_dir
    from kinemesh.checks import out_dir
    from kinemesh.errors import InputFileError, KinemeshError

    out_dir(args.out, args.force)
    obj = load_parts(args.input, labels=args.labels, up=args.up, auto_parts=not args.no_auto_parts)
    parts = geometric_parts(obj)
    target = None
    force = {}
    if args.prompt is not None:
        from kinemesh.articulation.prompt import resolve_prompt

        root, _, _ = part_tree(parts)
        target = resolve_prompt(args.prompt, [(p.name, p.label, p.vertices) for p in parts], exclude={root})
        if target.motion_type:
            force[target.part] = target.motion_type
    if args.observed:
        from kinemesh.articulation import from_motion

        obs = Path(args.observed)
        if args.observed == "model":
            fits = from_motion.fit_object_from_model(obj, args.checkpoint, device=args.device)
        elif obs.is_dir():
            fits = from_motion.fit_object_from_clouds(obj, from_motion.load_clouds(obs))
        else:
            from kinemesh.data.sequence import KinematicSequence

            fits = from_motion.fit_sequence(KinematicSequence.load(obs))
        known = {p.name for p in parts}
        missing = [f.part for f in fits if f.part not in known]
        if missing:
            raise InputFileError(args.observed, f"observed parts {missing} are not parts of {args.input} "
                                                f"({sorted(known)}); part names must match")
        size = float(np.max(np.ptp(np.concatenate([p.vertices for p in parts]), axis=0)))
        preds = [PartPrediction(f.part, f.type, f.axis, f.origin, f.limits, f.parent,
                                float(np.exp(-f.residual / (0.01 * size))), obj.part(f.part).label,
                                {"residual_m": f.residual, "source": "observed motion"}) for f in fits]
        root = next(p.name for p in parts if p.name not in {f.part for f in fits})
    else:
        preds = articulate(obj, weights=args.weights, check_validity=not args.no_validity, device=args.device,
                           force_types=force)
        root = next(p.name for p in parts if p.name not in {q.name for q in preds})
    if target is not None and target.part == root:
        raise KinemeshError(f"prompt {args.prompt!r} names '{root}', the object's base part, which does not move")
    art = to_articulated(obj, preds)
    joints = {j.child: j for j in art.joints}
    limit_notes = [f"joint '{joints[p.name].name}': limits {np.round(p.info['limits_before_contact'], 4).tolist()} "
                   f"-> {np.round(p.limits, 4).tolist()} (the slide keeps the part on its parent)"
                   for p in preds if p.limits is not None and "limits_before_contact" in p.info and p.name in joints]
    limit_notes += export.collision_free_limits(art)
    for p in preds:  # the JSON, URDF, MJCF and USD carry the same joints and (usable) limits
        if p.name in joints and joints[p.name].type == "continuous":
            p.type, p.limits = "continuous", None
        elif p.name in joints and p.limits is not None and joints[p.name].limits is not None:
            p.limits = joints[p.name].limits
    data = export.articulation_json(preds, root)
    if target is not None:
        tp = next(p for p in preds if p.name == target.part)
        data["target"] = {"prompt": args.prompt, "part": target.part, "type": tp.type,
                          "prompt_motion_type": target.motion_type}
    out = Path(args.out)
    with atomic_dir(out) as tmp:
        export.write_json(data, tmp / "articulation.json")
        export.write_urdf(art, tmp)
        export.write_mjcf(art, tmp / "object.xml")
        if args.usd:
            from kinemesh.data.usd import write_usd_articulated

            write_usd_articulated(art, tmp / "object.usda")
        if args.candidates:
            from kinemesh.articulation.candidates import label_valid_candidates

            labels = label_valid_candidates(art)
            export.write_json({name: [{"type": c.type, "axis": [round(float(x), 6) for x in c.axis],
                                       "origin": [round(float(x), 6) for x in c.origin],
                                       "limits": [round(float(x), 6) for x in c.limits],
                                       "collision": round(c.info["collision"], 5), "gap_m": round(c.info["gap"], 5)}
                                      for c in cands if c.valid] for name, cands in labels.items()},
                              tmp / "candidates.json")
        if not args.no_render:
            try:
                render_png(art, tmp / "articulation.png")
            except Exception as exc:  # rendering is a convenience; the joints are the product
                print(f"warning: articulation.png not rendered: {exc}")
    moving = [p for p in preds if p.type != "fixed"]
    print(f"{len(moving)} moving part(s) of {len(parts)}; wrote {out}/articulation.json, object.urdf, object.xml"
          + (", object.usda" if args.usd else "") + ("" if args.no_render else ", articulation.png"))
    for note in limit_notes:
        print(f"   limits: {note}")
    for p in preds:
        mark = "*" if target is not None and p.name == target.part else " "
        lim = "" if p.limits is None else f" limits [{p.limits[0]:.3g}, {p.limits[1]:.3g}]"
        print(f" {mark} {p.name:24s} {p.type:10s} parent {p.parent:16s} axis {np.round(p.axis, 3).tolist()} "
              f"origin {np.round(p.origin, 3).tolist()}{lim} conf {p.confidence:.2f}"
              + ("" if p.type_from() == "network" else f" (type from: {p.type_from()})"))
    return 0


def render_png(obj, path, open_fraction: float = 0.6):
    """A PNG of an ArticulatedObject at rest and with every joint at ``open_fraction`` of its range, joint axes
    drawn as arrows (``kinemesh.viz.render``); returns the path."""
    import numpy as np

    from kinemesh.viz.render import RenderStyle, opening_turn, render_frames

    rest, faces, ids = obj.merged(None)
    posed, _, _ = obj.merged(obj.open_values(open_fraction))
    axes = [(j.origin, j.axis) for j in obj.movable_joints]
    return render_frames(np.stack([rest, posed]), faces, path, part_ids=ids, axes=axes or None, progress=False,
                         titles=["rest", "articulated"],
                         style=RenderStyle(azimuth=opening_turn(obj, open_fraction)))
