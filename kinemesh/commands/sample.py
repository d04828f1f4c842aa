"""``kinemesh sample``: plausible deformed states of a mesh from the kinematic model's prior.

An articulated input (a URDF / PartNet-Mobility folder, or a segmented mesh whose kind is articulated) is decoded
as ``kinemesh simulate`` moves it: every part along its joint (the URDF's, else the ones predicted from the
static shape; ``kinemesh.dynamics.joints.JointDecoder``, calibrated, root part held), with the joint values
clipped to the joints' limits; joints the network does not move (a wheel, a knob) get values of their own, drawn
uniformly over half their range (``JointDecoder.prior_states``); ``--free-parts`` writes the network's own decoding
instead. ``--space reduced`` samples the reduced coordinates ``kinemesh simulate`` moves in instead of the
model's prior."""

from __future__ import annotations


def register(sub):
    from kinemesh.checks import add_part_arguments, number

    p = sub.add_parser("sample", help="write N plausible deformed states of a mesh (OBJ files + contact sheet)")
    p.add_argument("mesh", help="input mesh (OBJ, PLY, STL, GLB, OFF; metres, Z up), URDF or PartNet-Mobility folder")
    add_part_arguments(p)
    p.add_argument("--n", type=int, default=8, help="number of samples (default 8)")
    p.add_argument("--out", required=True, help="output folder (written atomically; an existing non-empty "
                                                "folder needs --force)")
    p.add_argument("--force", action="store_true", help="replace an existing non-empty --out folder")
    p.add_argument("--checkpoint", default=None, help="checkpoint folder (default: the shipped model)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--std", type=number(float, 0, lo_open=True), default=1.0, help="prior standard deviation scale (1 = the prior)")
    p.add_argument("--space", choices=["prior", "reduced"], default="prior",
                   help="prior (default): z from the model's prior; reduced: q ~ N(0, std^2 I) in the reduced "
                        "coordinates kinemesh simulate moves in (the active subspace of motion probes along the "
                        "joints: every joint moves, where the prior leaves a real cabinet's doors nearly shut)")
    p.add_argument("--k-q", type=int, default=8, help="--space reduced: reduced coordinates k_q (default 8, as "
                                                      "kinemesh simulate)")
    p.add_argument("--n-points", type=int, default=2048, help="surface points carrying the deformation")
    p.add_argument("--free-parts", action="store_true",
                   help="articulated: the parts as the network decodes them instead of along their joints (they may "
                        "come off their hinges)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="device (default cpu)")
    p.add_argument("--max-vertices", type=int, default=50000, help="decimate larger meshes to this budget")
    p.set_defaults(func=run)


def run(args) -> int:
    import json

    import numpy as np
    import torch

    from kinemesh.atomic import atomic_dir
    from kinemesh.checks import out_dir
    from kinemesh.data.exporters import export_obj
    from kinemesh.articulation.probes import articulation_for
    from kinemesh.dynamics.joints import JointDecoder
    from kinemesh.errors import ConfigError
    from kinemesh.geometry.kind import resolve_kind
    from kinemesh.geometry.segments import load_segmented
    from kinemesh.model import load_model
    from kinemesh.viz.render import RenderStyle, contact_sheet, facing_turn

    if args.n < 1 or args.n > 1000:
        raise ConfigError(f"--n must be in 1..1000, got {args.n}")
    if args.k_q < 1:
        raise ConfigError(f"--k-q must be >= 1, got {args.k_q}")
    out_dir(args.out, args.force)
    wm = load_segmented(args.mesh, labels=args.labels, auto_parts=not args.no_auto_parts,
                        max_vertices=args.max_vertices)
    model = load_model(args.checkpoint, device=args.device)
    v, f = np.asarray(wm.mesh.vertices, np.float64), np.asarray(wm.mesh.faces, np.int64)
    # a URDF / PartNet-Mobility input is articulated by definition (as kinemesh simulate takes it)
    kind = resolve_kind("articulated" if wm.articulation is not None else "auto", v, f, wm.part_ids)
    art, joints_from = articulation_for(v, f, wm.part_ids, wm.part_names, wm.articulation, seed=args.seed) \
        if kind == "articulated" and not args.free_parts else (None, "free parts" if args.free_parts else kind)
    if args.space == "prior":
        inst = model.instance(v, f, n_points=args.n_points, seed=args.seed, part_ids=wm.part_ids, kind=kind)
        decoder, z = inst, inst.prior_sample(args.n, seed=args.seed, std=args.std)
    else:  # the reduced coordinates of kinemesh simulate (motion probes along the same joints)
        from kinemesh.articulation.probes import probes_for
        from kinemesh.reduce import ReductionConfig, bind

        probes = probes_for(v, f, wm.part_ids, wm.part_names, kind, art if art is not None else wm.articulation,
                            seed=args.seed)[0]
        b = bind(v, f, model, kind=kind, part_ids=wm.part_ids, reduction=ReductionConfig(k_q=args.k_q),
                 n_points=args.n_points, seed=args.seed, device=args.device, probes=probes)
        inst, decoder = b.instance, b.decoder  # (bind binds the instance once)
        g = torch.Generator().manual_seed(int(args.seed))
        z = args.std * torch.randn(args.n, decoder.latent_dim, generator=g, dtype=torch.float64)
        z = z.to(decoder.mu_cond.dtype).to(decoder.mu_cond.device)
    with torch.no_grad():
        if art is not None:  # every part along its joint, within the joint limits
            jd = JointDecoder(decoder, art, wm.part_names, direct=True)
            q, decoded = jd.prior_samples(z, seed=args.seed, std=args.std)
            values = jd.joint_values(q, clip=True)
            joints = {"from": joints_from, "names": [j.name for j in jd.joints], "own": jd.direct,
                      "values": values.cpu().double().numpy().round(6).tolist()}
        else:
            decoded, joints = decoder.vertices(z), {"from": joints_from}
        verts = wm.to_file(decoded.cpu().double().numpy())  # the file's vertices, count and order
    faces, rest = wm.faces, wm.to_file(np.asarray(wm.mesh.vertices))
    face_parts, names = wm.face_parts()  # the input's parts, as o groups of every OBJ
    with atomic_dir(args.out) as tmp:
        export_obj(rest, faces, tmp / "rest.obj", face_parts=face_parts, part_names=names)
        tiles = [(rest, faces, None, "rest")]
        for i, v in enumerate(verts):
            export_obj(v, faces, tmp / f"sample_{i:02d}.obj", face_parts=face_parts, part_names=names)
            tiles.append((v, faces, None, f"sample {i}"))
        # the cameras face the side that moves (PartNet-Mobility fronts face -x)
        contact_sheet(tiles, tmp / "contact_sheet.png", cols=3, style=RenderStyle(azimuth=facing_turn(rest, verts)))
        (tmp / "samples.json").write_text(json.dumps({
            "mesh": str(args.mesh), "checkpoint": args.checkpoint or "default", "n": args.n, "seed": args.seed,
            "std": args.std, "space": args.space, "latent_dim": inst.latent_dim, "k": int(z.shape[-1]),
            "trained": model.info.get("trained", True), "kind": kind, "joints": joints,
            "z" if args.space == "prior" else "q": z.cpu().double().numpy().round(6).tolist()}, indent=1) + "\n")
    print(f"wrote {args.n} samples to {args.out}" + (f" (of the mesh decimated to {len(rest)} vertices)"
                                                     if wm.decimated else ""))
    return 0
