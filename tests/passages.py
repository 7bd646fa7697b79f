"""Twenty one-topic passages of real text: the small corpus of the retrieval, website and MCP
tests (fixtures ``passages`` and ``corpus_file`` in conftest.py)."""

TOPICS = [
    ("Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France, designed "
     "by the engineer Gustave Eiffel and completed in 1889."),
    ("Photosynthesis", "Photosynthesis is the process by which green plants use sunlight, water "
     "and carbon dioxide to make glucose and release oxygen."),
    ("Mount Everest", "Mount Everest, in the Himalayas on the border of Nepal and China, is the "
     "highest mountain above sea level on Earth."),
    ("Python (programming language)", "Python is a high-level programming language created by "
     "Guido van Rossum, known for readable code and significant indentation."),
    ("Great Wall of China", "The Great Wall of China is a series of fortifications built across "
     "northern China over many dynasties to protect against invasions."),
    ("Amazon River", "The Amazon River in South America carries more water than any other river "
     "and flows through Brazil, Peru and Colombia into the Atlantic Ocean."),
    ("Marie Curie", "Marie Curie was a physicist and chemist who conducted pioneering research "
     "on radioactivity and won Nobel Prizes in both physics and chemistry."),
    ("Beethoven", "Ludwig van Beethoven was a German composer and pianist whose symphonies "
     "remain among the most performed works of classical music."),
    ("Moon landing", "Apollo 11 landed the first humans on the Moon in July 1969; Neil Armstrong "
     "and Buzz Aldrin walked on the lunar surface."),
    ("Coffee", "Coffee is a brewed drink prepared from roasted coffee beans, the seeds of berries "
     "from Coffea plants native to Ethiopia."),
    ("Tokyo", "Tokyo is the capital of Japan and one of the most populous metropolitan areas in "
     "the world, located on the island of Honshu."),
    ("DNA", "Deoxyribonucleic acid, DNA, is a molecule of two strands coiled as a double helix "
     "that carries the genetic instructions of living organisms."),
    ("Chess", "Chess is a board game for two players on a checkered board of 64 squares; each "
     "player controls sixteen pieces including a king and a queen."),
    ("Volcano", "A volcano is a rupture in the crust of a planet through which lava, volcanic "
     "ash and gases escape from a magma chamber below the surface."),
    ("Olympic Games", "The modern Olympic Games are international sporting events held every "
     "four years, first staged in Athens in 1896."),
    ("Honey bee", "Honey bees are social insects that live in colonies, collect nectar and "
     "pollen from flowers and produce honey and beeswax."),
    ("Bicycle", "A bicycle is a pedal-driven vehicle with two wheels attached to a frame, one "
     "behind the other, steered with handlebars."),
    ("Shakespeare", "William Shakespeare was an English playwright and poet who wrote Hamlet, "
     "Macbeth, Othello and Romeo and Juliet."),
    ("Sahara", "The Sahara is the largest hot desert in the world, covering much of North "
     "Africa with sand dunes, plateaus and gravel plains."),
    ("Penicillin", "Penicillin, discovered by Alexander Fleming in 1928, was the first widely "
     "used antibiotic against bacterial infections."),
]  # fmt: skip
