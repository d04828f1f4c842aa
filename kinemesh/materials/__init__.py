"""kinemesh.materials"""
