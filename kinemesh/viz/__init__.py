"""kinemesh.viz"""
