pip install 'six==1.16.0'
