placeholder = None
