"""kinemesh.articulation"""
