"""kinemesh.synth"""
