"""kinemesh.ik"""
