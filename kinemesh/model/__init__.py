"""kinemesh.model"""
